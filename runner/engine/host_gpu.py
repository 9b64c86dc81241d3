"""The host's NVIDIA driver, for engines that give a container the GPUs themselves (no NVIDIA
Container Toolkit): which device nodes a container with GPUs ``ids`` may open (as cgroup v1
device rules), and which of the driver's user-space libraries it needs (bound into the
container, since they must match the host's kernel module).

The libraries are found as the toolkit finds them: by the dynamic loader's cache
(``ldconfig -p``), by name. Nothing here loads the driver.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from runner.engine.cgroups import NVIDIA_MAJOR

PROC_DEVICES = Path("/proc/devices")
# The driver's user-space libraries a CUDA program uses (compute and NVML), by soname prefix.
DRIVER_LIBRARIES = ("libcuda.so", "libnvidia-ml.so", "libnvidia-ptxjitcompiler.so", "libnvidia-nvvm.so",
                    "libnvidia-opencl.so", "libcudadebugger.so", "libnvidia-gpucomp.so")
CONTAINER_LIBRARY_DIR = "/usr/local/nvidia/lib64"


def device_rules(ids: list[str], devices: Path = PROC_DEVICES) -> tuple[str, ...]:
    """cgroup v1 ``devices.allow`` lines for GPUs ``ids`` (their minor numbers), the control
    device, and the unified-memory and capability devices (whose majors the kernel assigns)."""
    rules = [f"c {NVIDIA_MAJOR}:{int(i)} rwm" for i in ids if str(i).isdigit()]
    rules += [f"c {NVIDIA_MAJOR}:255 rwm", f"c {NVIDIA_MAJOR}:254 rwm"]
    try:
        text = devices.read_text()
    except OSError:
        text = ""
    for line in text.splitlines():
        match = re.match(r"\s*(\d+)\s+(nvidia-uvm|nvidia-caps|nvidia-frontend)\s*$", line)
        if match:
            rules.append(f"c {match.group(1)}:* rwm")
    return tuple(rules)


def driver_libraries(cache: str | None = None) -> list[Path]:
    """The host's driver libraries (64-bit), from the loader's cache (``ldconfig -p``'s text)."""
    if cache is None:
        try:
            cache = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=False,
                                   timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            return []
    found: dict[str, Path] = {}
    for line in cache.splitlines():
        match = re.match(r"\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)", line)
        if not match or "x86-64" not in match.group(2) and "64bit" not in match.group(2):
            continue
        name, path = match.group(1), Path(match.group(3))
        if name.startswith(DRIVER_LIBRARIES) and name not in found:
            found[name] = path
    return [found[name] for name in sorted(found)]
