"""Refuse, before any work, backends this host cannot run."""

from __future__ import annotations

from typing import Any, Iterable

from runner.engine.gpus import gpu_containers_possible
from runner.errors import UserError
from runner.manifest.schema import BACKENDS

from runner.harness.backends import GPU_BACKENDS
from runner.fingerprint.docker_engine import capture_docker
from runner.fingerprint.gpu import capture_gpu


def _gpu_facts(host: Any) -> tuple[int, bool]:
    """(visible NVIDIA GPUs, can the engine give them to containers) from a host fingerprint
    dict (``runner.fingerprint.capture_host``) or, given an engine or None, captured now."""
    if isinstance(host, dict):
        gpu, engine = host.get("gpu") or {}, host.get("docker") or {}
    else:
        gpu, engine = capture_gpu(), capture_docker(host)
    return len(gpu.get("gpus") or []), gpu_containers_possible({"docker": engine})


def check_backends_available(backends: Iterable[str], host: Any = None) -> None:
    """Raise UserError when a requested backend cannot run on this host.

    ``host`` is a host fingerprint dict, or an engine (or None) to look now. Only
    GPU backends need a look at the host; CPU backends are checked inside the image.
    """
    backends = list(backends)
    unknown = [b for b in backends if b not in BACKENDS]
    if unknown:
        raise UserError(
            f"unknown inference backend {', '.join(map(repr, unknown))}",
            f"choose from: {', '.join(BACKENDS)}",
        )
    wanted = [b for b in backends if b in GPU_BACKENDS]
    if not wanted:
        return
    gpus, containers_get_gpus = _gpu_facts(host)
    names = ", ".join(wanted)
    if gpus == 0:
        raise UserError(
            f"backend {names} needs an NVIDIA GPU, and this host has none visible to NVML",
            "run on a GPU host with the NVIDIA driver, or choose --backend torch / --backend onnxruntime",
        )
    if not containers_get_gpus:
        raise UserError(
            f"backend {names} needs the NVIDIA Container Toolkit, which this host's Docker engine lacks",
            "install nvidia-container-toolkit and run `nvidia-ctk runtime configure --runtime=docker`, "
            "then restart Docker",
        )
