"""Cold and warm build times of an entry image (default: the default entry).

Cold: every layer of the entry image rebuilt (no layer cache), base image and wheelhouse
already present, so it measures the build itself, not downloads. Warm: a rebuild of the
unchanged entry, which should be a cache hit (target: under 5 s). Code change: a rebuild
after one file of the entry changed, where only the layers after ``COPY entry/`` rerun.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from runner.entry_build import build_entry
from runner.engine import Engine, get_engine
from runner.images import ensure_base
from runner.terminal import yes_no
from runner.manifest import load_entry

WARM_TARGET_S = 5.0


def run(args) -> int:
    console = Console()
    entry = load_entry(args.entry)
    engine = get_engine()
    with console.status("preparing: base image and wheelhouse"):
        ensure_base(entry.base_image, engine)
        build_entry(entry, engine)  # fills the wheelhouse, so cold time excludes downloads
    with console.status("cold build (no layer cache)"):
        started = time.monotonic()
        cold = build_entry(entry, engine, no_cache=True)
        cold_s = time.monotonic() - started
    warm_times = []
    for _ in range(max(1, args.warm_runs)):
        started = time.monotonic()
        warm = build_entry(entry, engine)
        warm_times.append(time.monotonic() - started)
    warm_s = min(warm_times)
    with console.status("rebuild after a code change"):
        edit_s = _code_change_rebuild(entry, engine)
    table = Table(title=f"build benchmark: {entry.name}")
    for column in ("measure", "seconds", "note"):
        table.add_column(column, no_wrap=column == "seconds", justify="right" if column == "seconds" else "left")
    table.add_row("cold build", f"{cold_s:.1f}", f"no layer cache; image {cold.image_id[7:19]}")
    verdict = "[green]meets[/]" if warm_s < WARM_TARGET_S else "[red]misses[/]"
    table.add_row("warm rebuild", f"{warm_s:.2f}",
                  f"best of {len(warm_times)}; cache hit: {yes_no(warm.cached)}; {verdict} the {WARM_TARGET_S:.0f} s target")
    table.add_row("code-change rebuild", f"{edit_s:.1f}",
                  "one entry file changed; dependency layers from the layer cache")
    console.print(table)
    return 0


def _code_change_rebuild(entry, engine: Engine) -> float:
    """Build a copy of the entry with one extra file (same name, so the same cached layers)."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / entry.path.name
        shutil.copytree(entry.path, copy, ignore=shutil.ignore_patterns("__pycache__"))
        (copy / "BENCH-CHANGE.txt").write_text(f"{time.time()}\n")
        changed = load_entry(copy)
        started = time.monotonic()
        built = build_entry(changed, engine)
        seconds = time.monotonic() - started
    engine.remove_image(built.tag)
    return seconds
