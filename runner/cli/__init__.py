"""The ``runner`` command: a table of subcommands, each parsed and run by its own modules.

``SUBCOMMANDS`` has one row per subcommand: its name, its line in ``runner --help``, the
module that adds its arguments (``runner/cli/arguments/<module>.py``: ``DESCRIPTION`` and
``register(parser)``, importing nothing heavy) and the module that runs it
(``runner/cli/<module>.py``: ``run(args)``, or the function an action names with
``set_defaults(func="name")``). Building the parser imports neither; parsing imports the chosen
subcommand's argument module, and dispatch its run module, so ``runner --help`` and any
``runner SUB --help`` start at once (tests/test_cli_startup.py, ``runner bench cli``).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys
from collections import namedtuple

from runner import __version__
from runner.errors import RunnerError, UserError
from runner.safe_read import visible

# name: what people type; help: its line in `runner --help` (None: not listed, started by the
# runner itself); arguments: runner.cli.arguments.<arguments> adds its arguments; run:
# runner.cli.<run> runs it; aliases: other names it answers to.
Subcommand = namedtuple("Subcommand", "name help arguments run aliases", defaults=((),))

# In the order a user meets them: set up, build, run, check.
SUBCOMMANDS = [
    Subcommand("doctor", "show the Docker engine, debootstrap, disk, GPUs and Python on this host",
               "doctor", "doctor"),
    Subcommand("setup", "install/start the Docker engine and debootstrap, build the default base image",
               "setup", "setup"),
    Subcommand("config", "set, unset or show your settings (MLPerf submitter, storage, cooling...)",
               "config", "config"),
    Subcommand("images", "list or build the base images (recipes in images/)", "images", "images"),
    Subcommand("build", "build an entry's image (no network, hash-checked wheels) and record its SBOM",
               "build", "build"),
    Subcommand("data", "stage data sets (prepare, import) and list what is staged", "data", "data"),
    Subcommand("schema", "print the JSON Schema of entry.yaml (or of result.json)", "schema", "schema"),
    Subcommand("reproduce", "build an entry, train and infer in its container, sign the result",
               "reproduce", "reproduce"),
    Subcommand("study", "DAWNBench's studies: stability, threshold, batch size, roofline, generalization, "
               "lesion, factors, scaling", "study", "study"),
    # "infer", its earlier name, still works.
    Subcommand("ls", "list the runs: status, reached, TTA, conforming, verified, smoke", "ls", "ls"),
    Subcommand("show", "one run: its summary, its curve in the terminal, where its files are", "show", "show"),
    Subcommand("reinfer", "re-run only the inference phase (batch-1 latency) on a result's trained model",
               "reinfer", "reinfer", ("infer",)),
    Subcommand("fingerprint", "describe this host's CPU, memory, OS, GPUs and Docker engine",
               "fingerprint", "fingerprint"),
    Subcommand("profile", "list, show or check hardware profiles (hardware_profiles/*.yaml)", "profile", "profile"),
    Subcommand("keys", "create or show your signing key; trust, list or untrust others' keys", "keys", "keys"),
    Subcommand("ledger", "show or export the ledger of every run your key signed (for verify --ledger)",
               "ledger", "ledger"),
    Subcommand("bundle", "sign a result folder, or pack it as a deterministic .tar.gz", "bundle", "bundle"),
    Subcommand("verify", "check a signed result bundle offline", "verify", "verify"),
    Subcommand("compare", "compare runs that count side by side (TTA, epochs, s/epoch, batch-1 p50, cost)",
               "compare", "compare"),
    Subcommand("audit", "rebuild a bundle's entry and re-evaluate its models (needs Docker)", "audit", "audit"),
    Subcommand("drift", "rebuild the entries of archived bundles and report what changed", "drift", "drift"),
    Subcommand("import", "import claims from other benchmarks' formats", "import_", "import_"),
    Subcommand("export", "write a result in another benchmark's format", "export", "export"),
    Subcommand("leaderboard", "DAWNBench's tables: claims beside their reproductions", "leaderboard", "leaderboard"),
    Subcommand("bench", "run a benchmark and print its figures", "bench", "bench"),
    # One node of a run spanning nodes (runner.run.node_agent), started through srun.
    Subcommand("node-agent", None, "node_agent", "node_agent"),
]
COMMANDS = [s.name for s in SUBCOMMANDS if s.help]  # listed in `runner --help`, in this order


class OneLineParser(argparse.ArgumentParser):
    """Bad arguments are one line with the fix, like every other error (no usage dump)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}. Fix: see `{self.prog} --help`.\n")


class Subcommands(argparse._SubParsersAction):
    """The subcommands' action: a subcommand's arguments are added when it is parsed, so a
    command line imports the argument module of the one subcommand it names, no other."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.rows: dict[str, Subcommand] = {}  # by name and alias

    def add(self, row: Subcommand) -> argparse.ArgumentParser:
        listed = {"help": row.help} if row.help else {}  # no help: not listed in `runner --help`
        sub = self.add_parser(row.name, aliases=list(row.aliases), **listed)
        for name in (row.name, *row.aliases):
            self.rows[name] = row
        return sub

    def populate(self, name: str) -> argparse.ArgumentParser:
        """The subcommand's parser with its arguments (added once)."""
        sub = self._name_parser_map[name]
        if not getattr(sub, "populated", False):
            module = importlib.import_module(f"runner.cli.arguments.{self.rows[name].arguments}")
            sub.description = module.DESCRIPTION
            module.register(sub)
            sub.populated = True
        return sub

    def __call__(self, parser, namespace, values, option_string=None):
        self.populate(values[0])
        super().__call__(parser, namespace, values, option_string)


def parser(every: bool = False) -> argparse.ArgumentParser:
    """The ``runner`` parser; ``every``: with every subcommand's arguments added now (tests
    and documentation walk them), rather than the chosen one's when it is parsed."""
    top = OneLineParser(
        prog="runner",
        description="Reproduce deep-learning benchmark claims and sign what was measured.",
    )
    top.add_argument("--version", action="version", version=f"runner {__version__}")
    subcommands = top.add_subparsers(dest="command", metavar="COMMAND", required=True, action=Subcommands)
    assert isinstance(subcommands, Subcommands)  # argparse made the action asked for (typeshed says its own class)
    for row in SUBCOMMANDS:
        subcommands.add(row)
    if every:
        for row in SUBCOMMANDS:
            subcommands.populate(row.name)
    return top


def function(args: argparse.Namespace):
    """What runs the parsed command: the function its action named (``set_defaults(func=...)``,
    default ``run``) in its subcommand's run module, imported now."""
    row = next(s for s in SUBCOMMANDS if args.command in (s.name, *s.aliases))
    return getattr(importlib.import_module(f"runner.cli.{row.run}"), getattr(args, "func", "run"))


def one_line(text: str, limit: int = 2000) -> str:
    """An error message as one line of bounded length, whatever it quotes, with the control
    characters of what it quotes made visible (a file name may carry escape sequences)."""
    text = visible(" ".join(text.split()))
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


def _run_command(run, args) -> int | None:
    """``run(args)``; a command printing JSON (``--json``) reports its progress on stderr, so
    that stdout holds the JSON alone (staging the auditor's labels, a build, a training line)."""
    if not getattr(args, "json", False):
        return run(args)
    from rich.console import Console  # lazy: start-up (only a --json command needs a console here)

    from runner.report import Reporter, reporting  # lazy: start-up (as above)

    with reporting(Reporter(Console(stderr=True))):
        return run(args)


def main(argv: list[str] | None = None) -> int:
    if not sys.stdout.isatty():
        # Logs and pipes (CI) get tables at 120 columns rather than rich's 80-column default.
        os.environ.setdefault("COLUMNS", "120")
    args = parser().parse_args(argv)
    run = function(args)
    try:
        code = int(_run_command(run, args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
        return code
    except BrokenPipeError:  # `runner ... | head -1`: the reader has what it wanted
        return closed_pipe()
    except SystemExit as exc:  # rich's console exits 1 on a closed pipe
        if isinstance(exc.__context__, BrokenPipeError):
            return closed_pipe()
        raise
    except RunnerError as err:  # the one family: bad input exits 2, a failure met on the way 1
        print(f"runner: error: {one_line(err.line())}", file=sys.stderr)
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
