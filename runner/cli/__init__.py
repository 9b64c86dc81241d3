"""The ``runner`` command. Each subcommand is one module in this package with a
``register(subparsers)`` function that adds its parser and sets ``func``."""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys

from runner import __version__
from runner.errors import UserError

# In the order a user meets them: set up, build, run, check.
COMMANDS = [
    "doctor",
    "setup",
    "config",
    "images",
    "build",
    "data",
    "schema",
    "reproduce",
    "study",
    "reinfer",
    "fingerprint",
    "profile",
    "keys",
    "bundle",
    "verify",
    "compare",
    "audit",
    "drift",
    "import",
    "export",
    "leaderboard",
    "bench",
]
# Registered but not listed: started by the runner itself, not by people.
HIDDEN = ["node-agent"]  # one node of a run spanning nodes (runner.run.node_agent)
# A command whose name is a Python keyword lives in a module with a trailing underscore.
MODULES = {"import": "import_", "node-agent": "node_agent"}


class OneLineParser(argparse.ArgumentParser):
    """Bad arguments are one line with the fix, like every other error (no usage dump)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}. Fix: see `{self.prog} --help`.\n")


def parser() -> argparse.ArgumentParser:
    top = OneLineParser(
        prog="runner",
        description="Reproduce deep-learning benchmark claims and sign what was measured.",
    )
    top.add_argument("--version", action="version", version=f"runner {__version__}")
    subparsers = top.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS + HIDDEN:
        importlib.import_module(f"runner.cli.{MODULES.get(name, name)}").register(subparsers)
    return top


def one_line(text: str, limit: int = 2000) -> str:
    """An error message as one line of bounded length, whatever it quotes."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


def describe_os_error(err: OSError) -> str:
    """What the file system refused, where, and the fix."""
    import requests  # lazy: start-up (import runner.cli loads no engine)

    from runner import paths  # lazy: start-up (import runner.cli loads no engine)
    from runner.engine.disk import mount_point, out_of_space  # lazy: start-up (import runner.cli loads no engine)

    if isinstance(err, requests.exceptions.RequestException):  # the engine's HTTP API (docker-py)
        return (f"the Docker engine refused a request: {err}. Fix: retry; if it persists, "
                "`runner doctor` shows the engine's state.")
    if out_of_space(err) and not err.filename:  # a writer that did not say where (numpy)
        disks = sorted({str(mount_point(p)) for p in (paths.home(), paths.results_dir())})
        return (f"a disk is full: {err}. Fix: free space on {' or '.join(disks)} (the runner home "
                f"{paths.home()} and results {paths.results_dir()}), or set RUNNER_HOME / RUNNER_RESULTS "
                "to a larger disk, and retry.")
    where = f" {err.filename}" if err.filename else ""
    why = err.strerror or str(err)
    if err.errno == errno.ENOSPC:
        fix = f"free space on the disk holding{where or ' the runner home and results'} and retry"
    elif err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        fix = f"make{where or ' the folder'} writable (or set RUNNER_RESULTS / RUNNER_HOME elsewhere)"
    else:
        fix = "check the path and retry"
    return f"cannot use{where}: {why}. Fix: {fix}."


def closed_pipe() -> int:
    """The reader of stdout went away (``| head -1``): end quietly with status 0, as Unix tools
    do. Whatever is still buffered goes to /dev/null, so the interpreter's last flush cannot
    fail and print "Exception ignored ... BrokenPipeError"."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 0


def main(argv: list[str] | None = None) -> int:
    if not sys.stdout.isatty():
        # Logs and pipes (CI) get tables at 120 columns rather than rich's 80-column default.
        os.environ.setdefault("COLUMNS", "120")
    args = parser().parse_args(argv)
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
        return code
    except BrokenPipeError:  # `runner ... | head -1`: the reader has what it wanted
        return closed_pipe()
    except SystemExit as exc:  # rich's console exits 1 on a closed pipe
        if isinstance(exc.__context__, BrokenPipeError):
            return closed_pipe()
        raise
    except UserError as err:
        print(f"runner: error: {one_line(str(err))}", file=sys.stderr)
        return err.exit_code
    except OSError as err:  # a read-only results folder, a full disk, a vanished file
        print(f"runner: error: {one_line(describe_os_error(err))}", file=sys.stderr)
        return UserError.exit_code
    except MemoryError:
        print("runner: error: out of memory. Fix: free memory, or check the input is not "
              "hostile (a huge array or manifest).", file=sys.stderr)
        return UserError.exit_code
    except KeyboardInterrupt:
        print("runner: interrupted", file=sys.stderr)
        return 130
