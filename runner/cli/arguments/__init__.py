"""The subcommands' arguments: one module per subcommand of ``runner.cli.SUBCOMMANDS``, with
``DESCRIPTION`` (what ``runner SUB --help`` says first) and ``register(parser)`` (its
arguments; an action's subparser names its function in the run module with
``set_defaults(func="name")``).

These modules are imported to parse a command line, before anything runs: they import
argparse, the runner's light modules (errors, paths, tasks) and each other, never a
module that runs the command (tests/test_cli_startup.py holds it). A choice list that needs
a heavy module is checked by a type (``runner.cli.argtypes``) that imports it when the
option is given.
"""
