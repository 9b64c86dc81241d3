"""Transfer: a linear head on the final model's penultimate features, for another task.

The features are computed in a container of the run's own image (``python3 -m harness
features``, ``runner.study.sandbox``): the entry's builder with the final weights, and a copy
the builder initialises at random from a seed the runner draws, each read at the input of the
model's last layer. No entry code runs on the host. The arrays come back from code the entry
controls, so each is read with bounds (a regular file, a plain numeric ``.npy`` whose header
matches its size, the items the host sent, the one width ``features.json`` names, under
``MAX_WIDTH``, every value finite). The head is trained on the host (``linear_head``) on the
features of a sample of the other task's training items and scored on its whole evaluation
set; the same recipe on the random copy's features is the baseline that shows what training
learned, not what the architecture gives by itself.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tempfile
from pathlib import Path

import numpy as np

from runner.engine.containers import Mount, prepare_writable
from runner.errors import RunnerError, UserError
from runner.frameworks import FRAMEWORKS
from runner.safe_npy import load_npy
from runner.study.intervals import paired, wilson
from runner.study.linear_head import train_head
from runner.study.sandbox import HarnessJob, harness_limits, run_harness, threads_of

OUT_MOUNT, MODEL_MOUNT, INPUTS_MOUNT = "/features", "/model", "/data/transfer"
RESULT_FILE = "features.json"  # as runner/harness/features.py writes it
MODELS = ("trained", "random")
MAX_WIDTH = 4096  # ResNet-50's penultimate layer is 2,048 wide
MAX_RECORD_BYTES = 64 * 1024
TIMEOUT_S = 1800
LAYER = re.compile(r"[A-Za-z0-9_.]{1,200}")  # a module path, shown in the report
VERSION = re.compile(r"[A-Za-z0-9.+_-]{1,64}")


class FeatureError(RunnerError, ValueError):
    """The entry's image returned features that are not what was asked for."""

    default_fix = "rebuild the entry's image (`runner build`) so that it runs the runner's harness unmodified"


def _regular(path: Path) -> Path:
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise FeatureError(f"no readable {path.name}: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise FeatureError(f"{path.name} is not a regular file")
    return path


def parse_record(text: str) -> dict:
    """``features.json``, field by field: the layer's name, the width, torch's version."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise FeatureError(f"{RESULT_FILE} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise FeatureError(f"{RESULT_FILE} is not a JSON object")
    layer, dim, version = data.get("layer"), data.get("dim"), data.get("torch")
    if not isinstance(layer, str) or not LAYER.fullmatch(layer):
        raise FeatureError("layer is not a module path (A-Z a-z 0-9 _ .)")
    if type(dim) is not int or not 1 <= dim <= MAX_WIDTH:
        raise FeatureError(f"dim is not an integer in 1..{MAX_WIDTH}")
    if not isinstance(version, str) or not VERSION.fullmatch(version):
        raise FeatureError("torch is not a version string")
    return {"layer": layer, "dim": dim, "torch": version}


def read_record(folder: Path) -> dict:
    path = _regular(folder / RESULT_FILE)
    if path.stat().st_size > MAX_RECORD_BYTES:
        raise FeatureError(f"{RESULT_FILE} is over {MAX_RECORD_BYTES} bytes")
    try:
        return parse_record(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise FeatureError(f"{RESULT_FILE} is not UTF-8") from None


def read_features(folder: Path, model: str, name: str, items: int, dim: int) -> np.ndarray:
    """One array of features, held to the items sent and the width named."""
    path = _regular(folder / f"{model}-{name}.npy")
    try:
        array = load_npy(path, max_bytes=items * dim * 8)
    except ValueError as exc:
        raise FeatureError(f"{path.name}: {exc}") from None
    if array.dtype.kind != "f" or array.shape != (items, dim):
        raise FeatureError(f"{path.name} holds {array.dtype} {array.shape}, not float {items} x {dim}")
    if not np.isfinite(array).all():
        raise FeatureError(f"{path.name} holds values that are not finite")
    return array.astype(np.float32, copy=False)


def extract(engine, image, *, builder: str, framework: str, weights: Path, inputs: dict[str, Path],
            counts: dict[str, int], seed: int, cpus: float | None, memory, log_path: Path | None) -> dict:
    """Features of the trained model (``weights``) and of the random copy (``seed``) for each
    input set, computed in ``image`` (a ``runner.study.flops.CountImage``): ``{"record": ...,
    "features": {(model, set): array}}``."""
    declared = FRAMEWORKS.get(framework)
    if declared is None or declared.feature_reader is None:
        readers = [f.label for f in FRAMEWORKS.values() if f.feature_reader]
        raise UserError(f"the transfer reads features of {' or '.join(readers)} models; this entry's framework is "
                        f"{framework}", "pass --no-transfer for this entry")
    threads = threads_of(cpus)
    with tempfile.TemporaryDirectory(prefix="runner-features-") as tmp:
        out = Path(tmp) / "out"
        prepare_writable(out)
        quota = sum(counts.values()) * len(MODELS) * MAX_WIDTH * 4 + (1 << 20)
        run_harness(engine, image.id, HarnessJob(
            arguments=["features", "--entry-dir", "/entry", "--builder", builder, "--framework", framework,
             "--weights", f"{MODEL_MOUNT}/{weights.name}", "--random-seed", str(int(seed)), "--threads", str(threads),
             "--out", OUT_MOUNT, "--inputs", *[f"{name}={INPUTS_MOUNT}/{name}" for name in inputs]],
            mounts=[Mount(weights.parent, MODEL_MOUNT), *[Mount(folder, f"{INPUTS_MOUNT}/{name}")
                                                          for name, folder in inputs.items()],
                    Mount(out, OUT_MOUNT, read_only=False)],
            out=out, quota_bytes=quota, limits=harness_limits(cpus, memory, TIMEOUT_S),
            label="features", log_path=log_path, what=f"reading the features of {builder}",
            fix="check that the builder builds its model in the image",
        ))
        try:
            record = read_record(out)
            features = {(model, name): read_features(out, model, name, counts[name], record["dim"])
                        for model in MODELS for name in inputs}
        except FeatureError as err:
            raise UserError(f"the entry's image {image.id[:19]} returned no valid features: {err}",
                            "the features are the entry's own code's answer; check its builder") from None
    return {"record": record, "features": features}


def heads(features: dict, train_labels: np.ndarray, eval_labels: np.ndarray, classes: int) -> dict:
    """The head on each model's features: its accuracy on the evaluation items with Wilson's
    interval, and the trained model's lead over the random copy with the paired interval."""
    out, right = {}, {}
    for model in MODELS:
        head = train_head(features[(model, "train")], train_labels, classes)
        right[model] = head.predict(features[(model, "eval")]) == eval_labels
        correct = int(right[model].sum())
        out[model] = {"accuracy": correct / len(eval_labels), "correct": correct,
                      "interval": list(wilson(correct, len(eval_labels))), "penalty": head.penalty,
                      "iterations": head.iterations, "converged": head.converged}
    lead, low, high = paired(right["trained"], right["random"])
    out["lead"] = {"points": lead, "interval": [low, high]}
    return out
