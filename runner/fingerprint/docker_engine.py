"""The Docker engine: its version, and whether the NVIDIA container runtime is installed."""

from __future__ import annotations

from typing import Any

from runner.engine.client import connect
from runner.engine.kinds import current


def capture_docker(client: Any | None = None) -> dict:
    """Engine facts from ``client.version()`` and ``client.info()``.

    An unreachable engine is a fact about the host, not a failure of fingerprinting:
    the fields are null and ``note`` says why.
    """
    from docker.errors import DockerException  # lazy: heavy (docker)

    try:
        if client is None:
            client = connect(10)
        version = client.version()
        info = client.info()
    except (DockerException, OSError) as err:
        return {
            "version": None, "api_version": None, "runtimes": [], "default_runtime": None,
            "nvidia_runtime": None, "note": f"Docker engine unreachable: {err}",
        }
    runtimes = sorted(info.get("Runtimes") or {})

    components = {c.get("Name"): c.get("Version") for c in version.get("Components") or [] if isinstance(c, dict)}
    return {
        "engine": current().name,
        "product": "Podman Engine" if "Podman Engine" in components else "Docker Engine",
        "version": version.get("Version"),
        "api_version": version.get("ApiVersion"),
        "os_type": info.get("OSType"),
        "storage_driver": info.get("Driver"),
        "cgroup_version": info.get("CgroupVersion"),
        "runtimes": runtimes,
        "default_runtime": info.get("DefaultRuntime"),
        "nvidia_runtime": "nvidia" in runtimes,
        "note": None,
    }
