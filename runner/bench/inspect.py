"""The image inspection of two images sharing their lower layers (issue 50): the seconds and
the bytes each parses, with an empty cache.

The first image is the entry's own; the second is built FROM it with one small layer more
(as a second entry on the same base and framework layers is), so its inspection should parse
only that layer and only hash the others.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import cast

from rich.console import Console
from rich.table import Table

from runner.entry_build import build_entry, layers, parse_lock, resolve_wheels
from runner.entry_build.context import entry_files
from runner.entry_build.image_inspection import inspect_image
from runner.engine import Engine, get_engine
from runner.manifest import load_entry
from runner import paths


def run(args) -> int:
    console = Console()
    entry = load_entry(args.entry)
    engine = get_engine()
    with console.status("building the entry's image"):
        built = build_entry(entry, engine)
    staged = paths.data_dir() / entry.task.id  # the evaluation set, searched for as in a run (when staged)
    evaluation = (staged / "eval" / "images.npy", staged / "labels" / "eval_labels.npy")
    eval_inputs, eval_labels = (evaluation if all(p.is_file() for p in evaluation) else (None, None))
    with tempfile.TemporaryDirectory(prefix="runner-bench-inspect-") as scratch:
        tag = f"runner-bench/inspect-second:{os.getpid()}"
        with console.status("building a second image on its layers"):
            second = _child(engine, built.image_id, Path(scratch), tag)
        os.environ["RUNNER_HOME"] = str(Path(scratch) / "home")  # an empty cache
        wheels = list(resolve_wheels(parse_lock(entry.lock_path)).values())
        rows = []
        try:
            for name, image_id in (("first image", built.image_id), ("second image", second)):
                with console.status(f"inspecting the {name}"):
                    rows.append((name, *_inspected(engine, image_id, built.base.id, wheels, entry, (eval_inputs, eval_labels))))
            os.environ["RUNNER_HOME"] = str(Path(scratch) / "merged")  # before issue 50: per image, merged
            with console.status("inspecting the second image from its merged export (as before)"):
                started = time.monotonic()
                inspect_image(cast(Engine, _MergedOnly(engine)), second, built.base.id, wheels, entry.path,
                              entry_files(entry.path), eval_inputs, eval_labels, lock=entry.lock_path)
                rows.append(("second image, merged export (before)", time.monotonic() - started, 0, 0, 0))
        finally:
            engine.remove_image(tag)
    searched = "with" if eval_inputs else "without (none staged)"
    table = Table(title=f"image inspection, layer by layer: {entry.name}, {searched} the evaluation-set search")
    for column in ("image", "seconds", "layers parsed", "MB parsed", "MB of its layers"):
        table.add_column(column, justify="left" if column == "image" else "right")
    for name, seconds, parsed, parsed_bytes, total in rows:
        counts = (str(parsed), f"{parsed_bytes / 1e6:.1f}", f"{total / 1e6:.1f}") if total else ("-", "all", "-")
        table.add_row(name, f"{seconds:.1f}", *counts)
    console.print(table)
    return 0


class _MergedOnly:
    """The engine, but with no layers: the inspection reads the merged export, as before issue 50."""

    def __init__(self, engine: Engine):
        self._engine = engine

    def __getattr__(self, name: str):
        return getattr(self._engine, name)

    def image_layers(self, ref: str) -> None:
        return None

    def image_layer_folders(self, ref: str) -> None:
        return None


def _child(engine: Engine, image_id: str, folder: Path, tag: str) -> str:
    (folder / "Dockerfile").write_text(f"FROM {image_id}\nRUN printf 'print(2)\\n' > /tmp/second.py\n")
    for _ in engine.build_image(folder, "Dockerfile", tag, build_args={}, labels={"dev.runner.bench": "inspect"}):
        pass
    return engine.image(tag).id


def _inspected(engine: Engine, image_id: str, base_id: str, wheels: list[Path], entry,
               evaluation: tuple[Path | None, Path | None]) -> tuple[float, int, int, int]:
    """Seconds, layers parsed, bytes parsed (layers the cache lacked before) and all its layers' bytes."""
    diff_ids = list(engine.image(image_id).layers)
    before = {d for d in diff_ids if layers.load(d) is not None}
    started = time.monotonic()
    inspect_image(engine, image_id, base_id, wheels, entry.path, entry_files(entry.path), *evaluation, lock=entry.lock_path)
    seconds = time.monotonic() - started
    sizes = {d: (f.size if (f := layers.load(d)) is not None else 0) for d in diff_ids}
    parsed = [d for d in diff_ids if d not in before]
    return seconds, len(parsed), sum(sizes[d] for d in parsed), sum(sizes.values())
