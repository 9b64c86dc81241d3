"""Whether the engine can hand GPUs to a container (the backends' own GPU preflight is
tested in test_infer.py)."""

from __future__ import annotations

import json
from pathlib import Path

from runner.engine.gpus import gpu_containers_possible
from runner.inference.preflight import check_backends_available

FINGERPRINTS = Path(__file__).parent / "data" / "fingerprints"


def test_engine_with_nvidia_runtime_can_run_gpu_containers():
    fp = json.loads((FINGERPRINTS / "p3.16xlarge-8xV100.json").read_text())
    fp["docker"] = {**(fp.get("docker") or {}), "nvidia_runtime": True}
    assert gpu_containers_possible(fp)


def test_engine_without_the_toolkit_cannot(monkeypatch):
    monkeypatch.setattr("shutil.which", lambda tool: None)
    assert not gpu_containers_possible({"docker": {"nvidia_runtime": False}})



def test_a_hook_only_host_gives_gpus_to_training_and_to_tensorrt_alike(monkeypatch):
    """One rule: an engine with only the NVIDIA prestart hook (no registered runtime) runs
    GPU containers for training, so the tensorrt backend may not be refused there."""
    fp = json.loads((FINGERPRINTS / "p3.16xlarge-8xV100.json").read_text())
    fp["docker"] = {**(fp.get("docker") or {}), "nvidia_runtime": False}
    monkeypatch.setattr("shutil.which", lambda tool: f"/usr/bin/{tool}" if tool == "nvidia-container-cli" else None)
    assert gpu_containers_possible(fp)
    check_backends_available(["tensorrt"], fp)  # no error: the same answer as training's
    monkeypatch.setattr("shutil.which", lambda tool: None)
    assert not gpu_containers_possible(fp)
