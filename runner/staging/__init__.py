"""What a task's staging code writes a data set with: ``stage`` writes a set atomically with
its ``staged.json``, ``checks`` compares a user's files with the publisher's numbers,
``progress`` shows downloads and imports, ``blocks`` makes synthetic images.

It sits below ``runner/tasks`` (each task's ``source.py``, ``synthetic.py`` and training-tree
module use it) and ``runner/data`` (which finds the tasks, reads staged sets back and hands
them to runs), so neither of those reaches into the other.
"""
