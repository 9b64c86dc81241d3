"""Refuse, before any work, backends this host cannot run."""

from __future__ import annotations

from typing import Any, Iterable

from runner.errors import UserError
from runner.manifest.schema import BACKENDS

# Backends that need an NVIDIA GPU and the NVIDIA container runtime.
GPU_BACKENDS = frozenset({"tensorrt", "onnxruntime-cuda", "onnxruntime-tensorrt"})


def _gpu_facts(host: Any) -> tuple[int, bool | None]:
    """(visible NVIDIA GPUs, NVIDIA container runtime installed) from a host fingerprint
    dict (``runner.fingerprint.capture_host``) or, given a docker client or None, captured now."""
    if isinstance(host, dict):
        gpu, engine = host.get("gpu") or {}, host.get("docker") or {}
    else:
        from runner.fingerprint.docker_engine import capture_docker
        from runner.fingerprint.gpu import capture_gpu

        gpu, engine = capture_gpu(), capture_docker(host)
    return len(gpu.get("gpus") or []), engine.get("nvidia_runtime")


def check_backends_available(backends: Iterable[str], host: Any = None) -> None:
    """Raise UserError when a requested backend cannot run on this host.

    ``host`` is a host fingerprint dict, or a docker client (or None) to look now. Only
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
    gpus, nvidia_runtime = _gpu_facts(host)
    names = ", ".join(wanted)
    if gpus == 0:
        raise UserError(
            f"backend {names} needs an NVIDIA GPU, and this host has none visible to NVML",
            "run on a GPU host with the NVIDIA driver, or choose --backend torch / --backend onnxruntime",
        )
    if not nvidia_runtime:
        raise UserError(
            f"backend {names} needs the NVIDIA container runtime, which the Docker engine does not list",
            "install nvidia-container-toolkit and run `nvidia-ctk runtime configure --runtime=docker`, "
            "then restart Docker",
        )
