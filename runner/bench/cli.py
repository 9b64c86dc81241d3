"""``runner bench cli``: how long the command line takes to start.

``runner --help``, ``runner reproduce --help`` and ``runner verify --help``, each started N
times as a user starts them (the ``runner`` script beside this Python, else ``python -m
runner``), beside ``python3 -c pass`` (the interpreter alone) and ``python3 -c "import
runner"`` (the package, none of the command line). A first start of each, untimed, leaves the
bytecode caches any first start writes (even where PYTHONDONTWRITEBYTECODE is set), so every
timed start is a later one, as a user's are. The rounds interleave the commands, so a load
that comes and goes on a shared machine weighs on all of them alike; each figure is the
median of N. The target for a --help is 0.25 s. Also printed: what ``runner --help`` imports
(``modules_loaded``, which tests/test_cli_startup.py reads too).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

TARGET_S = 0.25
HELPS = (("--help",), ("reproduce", "--help"), ("verify", "--help"))
# Modules a --help must not import: what running a command needs, at a cost paid by every start.
# Every framework's module (runner.frameworks) is heavy too: see heavy_modules().
HEAVY = ("numpy", "scipy", "matplotlib", "onnx", "onnxruntime", "docker", "requests", "jsonschema",
         "yaml", "cryptography", "securesystemslib", "rich", "PIL", "pynvml", "runner.reproduce",
         "runner.manifest", "runner.engine", "runner.entry_build", "runner.verify", "runner.bundle",
         "runner.plan", "runner.harness", "runner.keys", "runner.data", "runner.leaderboard")

# Runs `runner ARGV` in this interpreter, its output to /dev/null, then prints every module
# loaded, one a line (nothing imported for the probe's own sake: sys and os are always there).
_PROBE = """
import os, sys
from runner.cli import main
real, sys.stdout = sys.stdout, open(os.devnull, "w")
try:
    main(sys.argv[1:])
except SystemExit:
    pass
sys.stdout = real
print("\\n".join(sorted(sys.modules)))
"""


def _environment(tree: str | None) -> dict[str, str]:
    """This environment; with ``tree``, that checkout first on PYTHONPATH (the commands also
    start in it: ``python -c`` puts the folder it starts in before PYTHONPATH)."""
    env = dict(os.environ)
    if tree:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(tree).resolve()), env.get("PYTHONPATH")]))
    return env


def runner_command() -> list[str]:
    """How a user starts the runner: the console script beside this Python, else ``-m runner``."""
    script = Path(sys.executable).parent / "runner"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "runner"]


def modules_loaded(*argv: str, tree: str | None = None) -> list[str]:
    """The modules a fresh interpreter has loaded after ``runner ARGV`` (e.g. ``--help``)."""
    done = subprocess.run([sys.executable, "-c", _PROBE, *argv], env=_environment(tree), cwd=tree,
                          capture_output=True, text=True, check=True)
    return done.stdout.split()


def heavy_modules() -> tuple[str, ...]:
    """HEAVY and every framework's module (runner.frameworks: torch, tensorflow, mxnet)."""
    from runner.frameworks import FRAMEWORKS  # lazy: start-up (the registry imports the harness's backend table)

    return (*HEAVY, *(framework.module for framework in FRAMEWORKS.values()))


def heavy(modules: list[str]) -> list[str]:
    """Those of ``modules`` that are (or are inside) a heavy module."""
    return sorted({h for h in heavy_modules() for m in modules if m == h or m.startswith(h + ".")})


def _timed(command: list[str], env: dict[str, str], cwd: str | None) -> float:
    started = time.perf_counter()
    subprocess.run(command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def run(args) -> int:
    console = Console(highlight=False)
    env = _environment(args.tree)
    python = sys.executable
    commands = {
        "python3 -c pass": [python, "-c", "pass"],
        'python3 -c "import runner"': [python, "-c", "import runner"],
        **{f"runner {' '.join(argv)}": [*runner_command(), *argv] for argv in HELPS},
    }
    where = subprocess.run([python, "-c", "import runner; print(runner.__file__)"], env=env, cwd=args.tree,
                           capture_output=True, text=True, check=True).stdout.strip()
    first = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    times: dict[str, list[float]] = {name: [] for name in commands}
    with console.status(f"starting each of {len(commands)} commands {args.runs} times"):
        for command in commands.values():  # once each, untimed: bytecode written, files in the page cache
            _timed(command, first, args.tree)
        for _ in range(max(1, args.runs)):
            for name, command in commands.items():
                times[name].append(_timed(command, env, args.tree))
    bare = statistics.median(times["python3 -c pass"])
    table = Table(title=f"start-up, median of {max(1, args.runs)} (runner from {Path(where).parent})")
    for column in ("command", "median s", "min s", "max s", "over python3 -c pass", "target"):
        table.add_column(column, justify="left" if column in ("command", "target") else "right")
    for name, values in times.items():
        median = statistics.median(values)
        target = ""
        if name.startswith("runner "):
            target = f"[green]meets[/] {TARGET_S} s" if median <= TARGET_S else f"[red]misses[/] {TARGET_S} s"
        table.add_row(name, f"{median:.3f}", f"{min(values):.3f}", f"{max(values):.3f}",
                      "" if name == "python3 -c pass" else f"{(median - bare) * 1000:+.0f} ms", target)
    console.print(table)
    loaded = modules_loaded("--help", tree=args.tree)
    ours = [m for m in loaded if m == "runner" or m.startswith("runner.")]
    found = heavy(loaded)
    console.print(f"runner --help loads {len(loaded)} modules, {len(ours)} of them the runner's; "
                  + (f"[red]heavy[/]: {', '.join(found)}" if found else "none of the heavy ones (torch, numpy, "
                     "docker, matplotlib, scipy, onnx, yaml, rich, the pipeline's packages)"))
    return 0
