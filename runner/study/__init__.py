"""The studies DAWNBench's authors ran on the metric itself, as commands (``runner study``).

Each study runs an entry (or reads runs already made), writes a folder
``results/<entry>/studies/<kind>-<stamp>/`` with links to its signed run folders, a JSON
summary, PNG plots and ``report.html``. One module per study and one row of
``registry.STUDIES`` naming its arguments, its run, its ``--from-runs`` reader and its
report; ``dispatch`` runs a request by its row, ``report`` renders them.
"""
