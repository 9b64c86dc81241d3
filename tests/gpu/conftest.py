"""Fixtures for the tests that need a real NVIDIA GPU. They skip (the only skips the suite
allows, tests/conftest.py) when no GPU is visible, with the reason. No Docker on the GPU
machine: these tests call the runner's modules directly.

Run them from the repository root:  python3 -m pytest tests/gpu -q -p no:cacheprovider
"""

from __future__ import annotations

import pytest

from runner import paths

RESNET9 = paths.repo_root() / "entries" / "resnet9-v100"


@pytest.fixture(scope="session")
def torch_cuda():
    torch = pytest.importorskip("torch", reason="no torch: no CUDA GPU test possible")
    if not torch.cuda.is_available():
        pytest.skip(f"no CUDA GPU visible (torch {torch.__version__}, CUDA build {torch.version.cuda})")
    return torch


@pytest.fixture(scope="session")
def nvml():
    pynvml = pytest.importorskip("pynvml", reason="no nvidia-ml-py: no NVIDIA GPU test possible")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        pytest.skip(f"no NVIDIA GPU visible to NVML ({type(exc).__name__})")
    if pynvml.nvmlDeviceGetCount() == 0:
        pytest.skip("no NVIDIA GPU visible to NVML")
    yield pynvml
    pynvml.nvmlShutdown()


@pytest.fixture(scope="session")
def resnet9(torch_cuda):
    """The resnet9 entry's model with seeded random weights, its state_dict on disk."""
    import sys

    sys.path.insert(0, str(RESNET9))
    try:
        from model import build_model  # the entry's builder
    finally:
        sys.path.remove(str(RESNET9))
    torch_cuda.manual_seed(0)
    model = build_model().eval()
    return model


@pytest.fixture(scope="session")
def cifar_like():
    import numpy as np

    rng = np.random.default_rng(0)
    return rng.standard_normal((512, 3, 32, 32)).astype(np.float32)
