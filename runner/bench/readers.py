"""The readers of untrusted entry folders, timed against issue 46's targets in one sitting.

The information check (``runner.entry_build.information``: ``entry_files`` then
``measure_entry``, what ``runner build`` audits and ``runner verify`` re-checks) once read
each file whole and compressed it whole three times. Each case here runs that check in a
fresh interpreter of its own, so its time and its peak memory (``ru_maxrss``) are its own:

* the default entry, as it is (target: under 1 s);
* the default entry with a sparse file of 4 GiB (apparent size; nothing on disk): refused
  by its size before a byte is read (target: under 1 s and 100 MB);
* the default entry with a 16 MB text (random hex, which no compressor shrinks below half):
  streamed, and stopped once over every budget (target: under 5 s);
* the default entry with 20,000 small Python files: the first measured until the entry is
  over every budget, the rest listed (target: under 5 s).

Then the readers of results (issue 50: at most 0.3 s over 100 runs): ``runner ls`` and
``runner show`` over ``--runs`` signed runs, each started as a user starts it (a fresh
interpreter, bytecode cached by an untimed first start): "cold" with nothing cached (no
verdict, no listing), "warm" the median of ``--repeat`` starts after it; with ``--before``, a
checkout from before a change timed on the same runs in the same sitting. The runs are the
test suite's synthetic ones (``tests/bench_views.py``'s maker over ``tests/synthetic_result.py``:
every figure computed by the project's own functions, signed by a fresh key, one of them
forged and one a smoke run), so this part needs a checkout with its tests.

Everything lives in a temporary folder.
"""

from __future__ import annotations

import importlib.util
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from runner.bench import DEFAULT_ENTRY

# Each case's target: seconds, and peak MiB where the issue sets one.
TARGETS = {"entry": (1.0, None), "sparse": (1.0, 100), "text": (5.0, None), "files": (5.0, None)}

# The information check of one folder in a fresh interpreter: seconds, peak MiB, and what it said.
_CHECK = """
    import sys, time
    def peak_mib():  # this process's own peak (VmHWM starts again at exec; ru_maxrss keeps the parent's)
        with open("/proc/self/status") as fh:
            return next(int(line.split()[1]) // 1024 for line in fh if line.startswith("VmHWM:"))
    from pathlib import Path
    from runner.entry_build.context import entry_files
    from runner.entry_build.information import measure_entry
    from runner.errors import UserError
    folder = Path(sys.argv[1])
    started = time.monotonic()
    try:
        report = measure_entry(folder, entry_files(folder), folder / "requirements.lock")
        said = (f"{report.total:,} bytes of information in {len(report.files):,} files"
                + (" (over the budget)" if report.over else ""))
    except UserError as err:
        said = f"refused: {err.problem}"
    seconds = time.monotonic() - started
    print(f"{seconds:.3f} {peak_mib()} {said}")
"""


def _entry_folder(name: str) -> Path:
    folder = Path(name)
    if not folder.is_dir():  # the default, from the checkout this runner is in
        folder = Path(__file__).resolve().parent.parent.parent / name
    return folder


def _check(folder: Path) -> tuple[float, int, str]:
    repo = Path(__file__).resolve().parent.parent.parent
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_CHECK), str(folder)], capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(repo)})
    if done.returncode != 0:
        return float("nan"), 0, f"failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}"
    seconds, peak, said = done.stdout.strip().split(" ", 2)
    return float(seconds), int(peak), said


def _cases(entry: Path, tmp: Path, args) -> dict[str, tuple[str, Path]]:
    """The four folders, by kind: (label, folder): the entry as it is, and copies with a
    hostile file or files."""
    cases = {"entry": ("default entry" if args.entry == DEFAULT_ENTRY else entry.name, entry)}
    for kind, label in (("sparse", f"{args.sparse_gib} GiB sparse file"), ("text", f"{args.text_mb} MB text"),
                        ("files", f"{args.small_files:,} small files")):
        folder = tmp / kind / entry.name
        shutil.copytree(entry, folder, ignore=shutil.ignore_patterns("__pycache__"))
        cases[kind] = (label, folder)
    with open(cases["sparse"][1] / "weights.bin", "wb") as fh:
        fh.truncate(args.sparse_gib << 30)
    hexed = random.Random(46).randbytes(args.text_mb * 500_000).hex()
    (cases["text"][1] / "notes.txt").write_text("\n".join(hexed[i:i + 100] for i in range(0, len(hexed), 100)))
    many = cases["files"][1] / "many"
    many.mkdir()
    rnd = random.Random(46)
    for i in range(args.small_files):
        (many / f"m{i:05}.py").write_text(f'"""Note {i}."""\nX = "{rnd.randbytes(16).hex()}"\n')
    return cases


REPO = Path(__file__).resolve().parent.parent.parent
VIEWS_TARGET_S = 0.3  # issue 50: runner ls and runner show over 100 runs


def _maker() -> str | None:
    """The test suite's maker of signed runs (``tests/bench_views.py``), None outside a checkout."""
    path = REPO / "tests" / "bench_views.py"
    if not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location("bench_views", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.MAKER


def _start(tree: Path, root: Path, argv: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds ``runner ARGV`` takes, started from ``tree`` in a fresh interpreter
    (the CPU seconds: what a busy shared host does not stretch)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=str(tree), RUNNER_HOME=str(root / "home"), COLUMNS="80")
    before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "runner", *argv], env=env, cwd=root, capture_output=True,
                          text=True, timeout=600)
    seconds, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode not in (0, 3):
        raise RuntimeError(f"runner {' '.join(argv[:2])} ({tree}) exited {done.returncode}: {done.stderr[-300:]}")
    return seconds, cpu


def time_views(trees: list[tuple[str, Path]], runs: int, repeat: int, console: Console) -> list[tuple] | str:
    """(checkout, command, cold s, warm s, warm CPU s) for ls and show over ``runs`` signed runs, or why not."""
    maker = _maker()
    if maker is None:
        return "not timed: the runs are made by the test suite's maker (tests/bench_views.py), not in this tree"
    rows = []
    with tempfile.TemporaryDirectory(prefix="runner-bench-views-") as tmp:
        root = Path(tmp)
        with console.status(f"making {runs} signed runs"):
            made = subprocess.run([sys.executable, "-c", maker, str(REPO), str(root), str(max(runs - 2, 1))],
                                  env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, timeout=1800)
        if made.returncode != 0:
            last = (made.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
            return f"not timed: making the signed runs failed ({last}); they need the test extra: pip install -e '.[test]'"
        where = ["--results", str(root / "results"), "--trusted-keys", str(root / "trusted.pub.json")]
        commands = {"ls": ["ls", *where], "show": ["show", "mnist-cnn-cpu/s1-000001", *where]}
        for label, tree in trees:
            for name, argv in commands.items():
                with console.status(f"{label}: runner {name}, cold and {repeat} warm"):
                    _start(tree, root, argv)  # untimed: bytecode written, as a user's later starts find it
                    for cache in ("verdicts", "listing"):
                        shutil.rmtree(root / "home" / cache, ignore_errors=True)
                    cold = _start(tree, root, argv)
                    warm = [_start(tree, root, argv) for _ in range(max(repeat, 1))]
                rows.append((label, name, cold[0], statistics.median(w for w, _ in warm),
                             statistics.median(c for _, c in warm)))
    return rows


def print_views(console: Console, rows: list[tuple] | str, runs: int) -> None:
    if isinstance(rows, str):
        console.print(f"runner ls and show over {runs} runs: {escape(rows)}")  # the fix's '.[test]' is no markup
        return
    table = Table(title=f"runner ls and show over {runs} signed runs (a fresh interpreter each; COLUMNS=80)")
    for column in ("checkout", "command", "cold s", "warm s", "warm CPU s", "target", ""):
        table.add_column(column, justify="right" if column.endswith(" s") else "left", no_wrap=True)
    for label, name, cold, warm, cpu in rows:
        meets = "[green]meets[/]" if warm <= VIEWS_TARGET_S else "[red]misses[/]"
        table.add_row(label, f"runner {name}", f"{cold:.2f}", f"{warm:.2f}", f"{cpu:.2f}",
                      f"warm <= {VIEWS_TARGET_S:g} s", meets)
    console.print(table)


def run(args) -> int:
    console = Console()
    if args.part in ("all", "views"):
        trees = ([("before", Path(args.before).resolve())] if args.before else []) + [("this tree", REPO)]
        print_views(console, time_views(trees, args.runs, args.repeat, console), args.runs)
    if args.part == "views":
        return 0
    entry = _entry_folder(args.entry)
    if not (entry / "entry.yaml").is_file():
        console.print(f"[red]error:[/] {entry} is not an entry folder (no entry.yaml)")
        return 2
    rows = []
    with tempfile.TemporaryDirectory(prefix="runner-bench-readers-") as tmp:
        with console.status("making the hostile entry folders"):
            cases = _cases(entry, Path(tmp), args)
        for kind, (label, folder) in cases.items():
            with console.status(f"information check: {label}"):
                rows.append((kind, label, *_check(folder)))
    table = Table(title=f"readers of untrusted entry folders (information check of {entry.name} and copies)")
    for column in ("case", "seconds", "peak MiB", "target", "", "what the check said"):
        number = column in ("seconds", "peak MiB")
        table.add_column(column, no_wrap=column != "what the check said", justify="right" if number else "left")
    for kind, name, seconds, peak, said in rows:
        limit_s, limit_mib = TARGETS[kind]
        meets = seconds < limit_s and (limit_mib is None or peak < limit_mib)
        target = f"< {limit_s:g} s" + (f", < {limit_mib} MiB" if limit_mib else "")
        table.add_row(name, f"{seconds:.2f}", str(peak), target, "[green]meets[/]" if meets else "[red]misses[/]", said)
    console.print(table)
    return 0
