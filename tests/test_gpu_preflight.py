"""Whether the engine can hand GPUs to a container (the backends' own GPU preflight is
tested in test_infer.py)."""

from __future__ import annotations

import json
from pathlib import Path

from runner.reproduce import gpu_containers_possible

FINGERPRINTS = Path(__file__).parent / "data" / "fingerprints"


def test_engine_with_nvidia_runtime_can_run_gpu_containers():
    fp = json.loads((FINGERPRINTS / "p3.16xlarge-8xV100.json").read_text())
    fp["docker"] = {**(fp.get("docker") or {}), "nvidia_runtime": True}
    assert gpu_containers_possible(fp)


def test_engine_without_the_toolkit_cannot(monkeypatch):
    monkeypatch.setattr("shutil.which", lambda tool: None)
    assert not gpu_containers_possible({"docker": {"nvidia_runtime": False}})

