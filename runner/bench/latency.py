"""``runner bench latency``: batch-1 p50 latency of each CPU backend on the default entry's
model, and the ratio onnxruntime / torch (target: 0.5 or lower on this CPU).

It runs the toolkit's harness (the same code the inference container runs) directly on
the host's Python, so it needs torch and onnxruntime installed on the host; thread
settings are swept (1 and 2 intra-op threads) and the manifest's setting is the headline.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from runner import data, paths
from runner.bench import DEFAULT_ENTRY
from runner.errors import UserError
from runner.harness.backends import CPU_BACKENDS, REGISTRY, backends_for
from runner.manifest import Entry, load_entry
from runner.results.layout import entry_runs

BACKENDS = tuple(b for b in CPU_BACKENDS if b in backends_for("pytorch"))  # the default entry's
TARGET_RATIO = 0.5


def require_host_packages(find_spec=None) -> None:
    """The harness runs on this host's Python here, not in an entry's image: what its backends
    import must be installed on the host (the runner's test extra pins them)."""
    find_spec = find_spec or importlib.util.find_spec
    needed = dict.fromkeys(name for b in BACKENDS for name in REGISTRY[b].imports)
    missing = [name for name in needed if find_spec(name) is None]
    if missing:
        raise UserError(
            f"runner bench latency runs the harness on this host's Python ({sys.executable}), which lacks "
            f"{', '.join(missing)}",
            f"install them there: {sys.executable} -m pip install -e '{paths.repo_root()}[test]' "
            "(the test extra pins torch, onnx and onnxruntime at the default entry's versions)")


def _weights(entry: Entry, scratch: Path) -> tuple[Path, str]:
    """The latest result's trained weights, else the builder's untrained ones (batch-1
    latency does not depend on the weights' values)."""
    rel = entry.inference.weights.removeprefix("/output/")
    trained = [run for run in entry_runs(paths.results_dir(), entry.name) if (run / "output" / rel).is_file()]
    if trained:
        return trained[-1] / "output" / rel, f"trained weights of {trained[-1].name}"

    import torch  # lazy: heavy (torch)

    module_name, _, function = entry.inference.builder.partition(":")
    sys.path.insert(0, str(entry.path))
    try:
        model = getattr(importlib.import_module(module_name), function)()
    except (ImportError, AttributeError) as exc:
        raise UserError(f"cannot import {entry.inference.builder} from {entry.path}: {exc}",
                        "check the entry's inference.builder") from None
    finally:
        sys.path.remove(str(entry.path))
    path = scratch / "weights.pt"
    torch.save(model.state_dict(), path)
    return path, "untrained weights (no result yet)"


def _eval_images(entry: Entry, scratch: Path, items: int) -> tuple[Path, str]:
    try:
        return data.staged(entry.task.id).eval_dir, f"staged {entry.task.id} evaluation images"
    except (UserError, ImportError):
        shape = entry.task.input_shape
        if shape is None:
            raise UserError(f"{entry.task.id} has no image inputs to time", "bench an image entry") from None
        folder = scratch / "eval"
        folder.mkdir()
        rng = np.random.default_rng(0)
        np.save(folder / "images.npy", rng.integers(0, 256, (items, *shape), dtype=np.uint8))
        return folder, "random images (data not staged)"


def _run_harness(entry: Entry, weights: Path, eval_dir: Path, out: Path, threads: int,
                 items: int, warmup: int) -> dict[str, np.ndarray]:
    cmd = [
        sys.executable, "-m", "harness", "--entry-dir", str(entry.path),
        "--builder", entry.inference.builder, "--weights", str(weights), "--eval-dir", str(eval_dir),
        "--out", str(out), "--backends", *BACKENDS, "--warmup", str(warmup),
        "--threads", str(threads), "--opset", str(entry.inference.opset), "--limit", str(items),
    ]
    env = {**os.environ, "PYTHONPATH": str(paths.harness_dir().parent), "OMP_NUM_THREADS": str(threads)}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise UserError(f"the harness failed on the host: {proc.stderr.strip().splitlines()[-1:]}",
                        "check that torch and onnxruntime are installed on the host")
    return {b: np.load(out / b / "latencies_ns.npy") for b in BACKENDS}


def bench_infer(entry_path: str | Path = DEFAULT_ENTRY, *, items: int = 2000, warmup: int = 200,
                threads: tuple[int, ...] = (1, 2), console: Console | None = None) -> dict:
    """Time both CPU backends at each thread count; print and return the p50s and ratios.

    Returns ``{"threads": {t: {"torch": p50_ms, "onnxruntime": p50_ms, "ratio": r}},
    "headline_threads": t, "ratio": r, "weights": ..., "images": ...}``.
    """
    console = console or Console()
    require_host_packages()
    folder = Path(entry_path)
    entry = load_entry(folder if folder.exists() else paths.repo_root() / folder)
    results: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="runner-bench-infer-") as tmp:
        scratch = Path(tmp)
        weights, weights_note = _weights(entry, scratch)
        eval_dir, images_note = _eval_images(entry, scratch, items)
        for t in threads:
            lat = _run_harness(entry, weights, eval_dir, scratch / f"t{t}", t, items, warmup)
            row = {b: float(np.median(lat[b])) / 1e6 for b in BACKENDS}
            row.update({f"{b}_mean": float(lat[b].mean()) / 1e6 for b in BACKENDS})
            row["ratio"] = row["onnxruntime"] / row["torch"]
            results[t] = row

    table = Table(title=f"batch-1 latency (ms), {entry.name}, harness on the host Python ({items} items, "
                        f"warm-up {warmup})")
    # short headers (ms throughout; ort is onnxruntime): six figures fit 80 columns, none wrapped
    for col in ("threads", "torch p50", "ort p50", "torch mean", "ort mean", "ort/torch p50"):
        table.add_column(col, justify="right", no_wrap=True)
    for t, row in results.items():
        table.add_row(str(t), f"{row['torch']:.4f}", f"{row['onnxruntime']:.4f}", f"{row['torch_mean']:.4f}",
                      f"{row['onnxruntime_mean']:.4f}", f"{row['ratio']:.3f}")
    console.print(table)
    headline = entry.inference.threads if entry.inference.threads in results else min(results)
    ratio = results[headline]["ratio"]
    verdict = "[green]meets[/]" if ratio <= TARGET_RATIO else "[red]misses[/]"
    console.print(f"model: {weights_note}; inputs: {images_note}")
    console.print(
        f"p50 at {headline} thread(s) (the manifest's setting): torch {results[headline]['torch']:.4f} ms, "
        f"onnxruntime {results[headline]['onnxruntime']:.4f} ms; ratio onnxruntime/torch = {ratio:.3f} "
        f"({verdict} the target of {TARGET_RATIO} or lower)"
    )
    return {"threads": results, "headline_threads": headline, "ratio": ratio,
            "weights": weights_note, "images": images_note}


def run(args) -> int:
    bench_infer(args.entry, items=args.items, warmup=args.warmup, threads=tuple(args.threads))
    return 0
