"""Can the engine hand NVIDIA GPUs to a container? One rule, for training and inference.

Docker's ``--gpus`` works through the NVIDIA Container Toolkit: either its runtime is
registered with the engine, or its prestart hook (``nvidia-container-runtime-hook``, with
``nvidia-container-cli``) is installed on the host.
"""

from __future__ import annotations

import shutil

HOOK_TOOLS = ("nvidia-container-runtime-hook", "nvidia-container-cli")


def gpu_containers_possible(fingerprint: dict) -> bool:
    """From a host fingerprint (``runner.fingerprint.capture_host``'s ``docker`` section)."""
    if (fingerprint.get("docker") or {}).get("nvidia_runtime"):
        return True
    return any(shutil.which(tool) for tool in HOOK_TOOLS)
