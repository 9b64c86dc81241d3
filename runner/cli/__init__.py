"""The ``runner`` command. Each subcommand is one module in this package with a
``register(subparsers)`` function that adds its parser and sets ``func``."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from runner import __version__
from runner.errors import UserError

# In the order a user meets them: set up, build, run, check.
COMMANDS = [
    "doctor",
    "setup",
    "images",
    "build",
    "data",
    "schema",
    "reproduce",
    "infer",
    "fingerprint",
    "profile",
    "keys",
    "bundle",
    "verify",
    "compare",
    "audit",
    "drift",
    "bench",
]


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="runner",
        description="Reproduce deep-learning benchmark claims and sign what was measured.",
    )
    top.add_argument("--version", action="version", version=f"runner {__version__}")
    subparsers = top.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"runner.cli.{name}").register(subparsers)
    return top


def main(argv: list[str] | None = None) -> int:
    if not sys.stdout.isatty():
        # Logs and pipes (CI) get tables at 120 columns rather than rich's 80-column default.
        os.environ.setdefault("COLUMNS", "120")
    args = parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except UserError as err:
        print(f"runner: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("runner: interrupted", file=sys.stderr)
        return 130
