"""The container-side harness, run on the host's Python exactly as the container runs it
(``python3 -m harness`` with only the harness folder's parent on PYTHONPATH)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from bands_model import MODEL_SOURCE, trained_bands

from runner import paths
from runner.inference.measure import evaluate_backend
from runner.inference.phase import Windows
from runner.tasks import Task

N_EVAL = 300

TASK = Task("bands", "top1", 0.99, N_EVAL, 10, (1, 28, 28), ("top1Accuracy",))


@pytest.fixture(scope="module")
def entry(tmp_path_factory) -> dict:
    """An entry folder with the builder, trained weights and an evaluation set."""
    import torch

    root = tmp_path_factory.mktemp("entry")
    (root / "bands.py").write_text(MODEL_SOURCE)
    model = trained_bands(root)
    (root / "output" / "model").mkdir(parents=True)
    weights = root / "output" / "model" / "weights.pt"
    torch.save(model.state_dict(), weights)

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, N_EVAL).astype(np.int64)
    images = rng.integers(0, 40, (N_EVAL, 1, 28, 28)).astype(np.uint8)
    for i, c in enumerate(labels):
        images[i, 0, 2 * c + 4 : 2 * c + 6, :] = 200
    (root / "eval").mkdir()
    np.save(root / "eval" / "images.npy", images)
    return {"dir": root, "weights": weights, "labels": labels}


def run_harness(entry: dict, out: Path, backends: list[str], *, builder: str = "bands:build",
                warmup: int = 10, extra: list[str] = ()):
    """Run the harness in a subprocess, stamping its lines on this process' monotonic clock
    through the same ``Windows`` the host uses for containers."""
    env = {**os.environ, "PYTHONPATH": str(paths.harness_dir().parent)}
    cmd = [
        sys.executable, "-m", "harness", "--entry-dir", str(entry["dir"]), "--builder", builder,
        "--weights", str(entry["weights"]), "--eval-dir", str(entry["dir"] / "eval"),
        "--out", str(out), "--backends", *backends, "--warmup", str(warmup), *extra,
    ]
    windows = Windows()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=out.parent)
    t0 = time.monotonic()
    for line in proc.stdout:
        windows.on_line(line.rstrip("\n"), time.monotonic() - t0)
    stderr = proc.stderr.read()
    return proc.wait(), windows, stderr


def test_every_item_is_timed_once_and_both_backends_pass(entry, tmp_path):
    out = tmp_path / "inference"
    code, windows, stderr = run_harness(entry, out, ["torch", "onnxruntime"], warmup=25)
    assert code == 0, stderr
    for backend in ("torch", "onnxruntime"):
        preds = np.load(out / backend / "predictions.npy")
        lat = np.load(out / backend / "latencies_ns.npy")
        assert preds.shape == (N_EVAL,) and preds.dtype == np.int64
        assert lat.shape == (N_EVAL,) and lat.dtype == np.int64 and (lat > 0).all()
        info = json.loads((out / backend / "info.json").read_text())
        assert info["count"] == N_EVAL
        assert info["warmup"]["count"] == 25 and info["warmup"]["seconds"] > 0
        assert info["timed_ns"] == int(lat.sum()) <= info["window_ns"]
        assert info["threads"]["intra_op"] == 1
        record = evaluate_backend(backend, out / backend, TASK, entry["labels"],
                                  windows.window(backend), usd_per_hour=0.1)
        assert record["passed_gate"], record["gate_reason"]
        assert record["scores"]["top1"] == 1.0
        assert record["latency_ms"]["p50"] > 0


def test_onnx_export_is_recorded(entry, tmp_path):
    out = tmp_path / "inference"
    code, _, stderr = run_harness(entry, out, ["onnxruntime"], extra=["--opset", "13"])
    assert code == 0, stderr
    export = json.loads((out / "export.json").read_text())
    assert export["opset"] == 13 and export["opset_in_file"] == 13
    assert "dynamo=False" in export["exporter"]
    import hashlib
    assert export["sha256"] == hashlib.sha256((out / "model.onnx").read_bytes()).hexdigest()
    info = json.loads((out / "onnxruntime" / "info.json").read_text())
    assert info["model_sha256"] == export["sha256"]
    assert info["settings"]["providers"] == ["CPUExecutionProvider"]
    assert info["settings"]["graph_optimization_level"] == "ORT_ENABLE_ALL"


def test_a_broken_export_fails_the_gate_while_torch_passes(entry, tmp_path):
    out = tmp_path / "inference"
    code, windows, stderr = run_harness(entry, out, ["torch", "onnxruntime"], builder="bands:build_broken")
    assert code == 0, stderr
    records = {
        b: evaluate_backend(b, out / b, TASK, entry["labels"], windows.window(b), usd_per_hour=0.1)
        for b in ("torch", "onnxruntime")
    }
    assert records["torch"]["passed_gate"]
    broken = records["onnxruntime"]
    assert not broken["passed_gate"]
    assert "misses the threshold" in broken["gate_reason"]
    assert broken["latency_ms"] is None and broken["cost_per_10k_usd"] is None


@pytest.mark.parametrize("backend", ["tensorrt", "onnxruntime-cuda", "onnxruntime-tensorrt"])
def test_gpu_only_backends_fail_clearly_before_any_work(entry, tmp_path, backend):
    out = tmp_path / "inference"
    code, windows, stderr = run_harness(entry, out, ["torch", backend])
    assert code == 2
    assert "harness: error:" in stderr and backend in stderr
    assert "Traceback" not in stderr
    assert not out.exists() and not windows.events  # nothing was started, not even torch


def test_unknown_backend_and_missing_weights_are_clear(entry, tmp_path):
    code, _, stderr = run_harness(entry, tmp_path / "a", ["tflite"])
    assert code == 2 and "unknown backend 'tflite'" in stderr
    missing = {**entry, "weights": tmp_path / "nope.pt"}
    code, _, stderr = run_harness(missing, tmp_path / "b", ["torch"])
    assert code == 2 and "no trained weights" in stderr and "Traceback" not in stderr


def test_harness_imports_nothing_from_the_runner_package():
    for source in paths.harness_dir().rglob("*.py"):
        text = source.read_text()
        assert "import runner" not in text and "from runner" not in text, source
