"""The torch-cuda backend's row in the backend table and its refusals on a host without a
GPU (this one); its timing on a GPU is in tests/gpu/test_torch_cuda.py."""

from __future__ import annotations

import subprocess
import sys

import pytest

from runner import paths
from runner.errors import UserError
from runner.harness.backends import GPU_BACKENDS, REGISTRY, backend_class, backends_for
from runner.harness.errors import HarnessError
from runner.inference import check_backends_available


def test_torch_cuda_is_a_gpu_row_for_pytorch_models():
    spec = REGISTRY["torch-cuda"]
    assert spec.needs_gpu and spec.framework == "pytorch" and "torch-cuda" in GPU_BACKENDS
    assert "torch-cuda" in backends_for("pytorch") and "torch-cuda" not in backends_for("tensorflow")


def test_a_host_without_a_gpu_refuses_it_before_any_work():
    host = {"gpu": {"gpus": []}, "docker": {"nvidia_runtime": False}}
    with pytest.raises(UserError, match="backend torch-cuda needs an NVIDIA GPU"):
        check_backends_available(["torch-cuda"], host)


def test_inside_an_image_without_cuda_the_harness_refuses_in_one_line(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is visible here: tests/gpu runs the backend")
    with pytest.raises(HarnessError) as err:
        backend_class("torch-cuda").check_available()
    assert "\n" not in str(err.value) and ("CUDA build" in str(err.value) or "no NVIDIA GPU" in str(err.value))
    entry = paths.repo_root() / "entries" / "mnist-cnn-cpu"
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "--entry-dir", str(entry), "--builder", "model:build_model",
         "--weights", str(tmp_path / "none.pt"), "--eval-dir", str(tmp_path), "--out", str(tmp_path / "out"),
         "--backends", "torch-cuda"],
        cwd=paths.harness_dir().parent, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("harness: error: the torch-cuda backend needs")
    assert not (tmp_path / "out").exists()  # refused before any work
