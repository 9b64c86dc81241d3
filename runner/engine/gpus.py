"""Can the engine hand NVIDIA GPUs to a container? One rule, for training and inference.

Docker's ``--gpus`` works through the NVIDIA Container Toolkit: either its runtime is
registered with the engine, or its prestart hook (``nvidia-container-runtime-hook``, with
``nvidia-container-cli``) is installed on the host.
"""

from __future__ import annotations

import shutil
from pathlib import Path

HOOK_TOOLS = ("nvidia-container-runtime-hook", "nvidia-container-cli")


CDI_SPECS = (Path("/etc/cdi"), Path("/var/run/cdi"))  # where nvidia-ctk cdi generate writes


def cdi_gpus_declared() -> bool:
    """Podman hands GPUs to containers through CDI: an NVIDIA spec (``nvidia-ctk cdi generate
    --output=/etc/cdi/nvidia.yaml``) must name them."""
    return any(p.is_dir() and any("nvidia" in f.name for f in p.iterdir()) for p in CDI_SPECS)


def hook_installed() -> bool:
    """The NVIDIA Container Toolkit's prestart hook is on this host (Docker's ``--gpus``)."""
    return any(shutil.which(tool) for tool in HOOK_TOOLS)


def gpu_containers_possible(fingerprint: dict) -> bool:
    """From a host fingerprint (``runner.fingerprint.capture_host``'s ``docker`` section: the
    engine's facts). Docker: its nvidia runtime or the toolkit's hook; Podman: a CDI spec;
    an engine that binds the driver itself (Charliecloud) says so in ``nvidia_runtime``."""
    facts = fingerprint.get("docker") or {}
    if facts.get("engine") == "podman":
        return cdi_gpus_declared()
    if facts.get("nvidia_runtime"):
        return True
    return facts.get("engine") in (None, "docker") and hook_installed()
