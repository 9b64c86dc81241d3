"""The host CPU: model, topology, the instruction-set flags that change results, caches.

Sources, best first: ``lscpu --json`` (topology as the kernel sees it), ``/proc/cpuinfo``
(model name, flags), ``/sys/devices/system/cpu/cpu0/cache`` (cache sizes) and
``os.sched_getaffinity`` (the cores this process may actually use).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
from pathlib import Path

# Flags that change what a framework can run fast (oneDNN, bf16/int8 kernels).
KEY_FLAGS = [
    "sse4_2", "avx", "avx2", "fma", "f16c",
    "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16",
    "avx_vnni", "amx_tile", "amx_bf16", "amx_int8",
    "asimd", "sve", "sve2",  # Arm equivalents, so Graviton hosts are described too
]


def read_cpuinfo(path: str | Path = "/proc/cpuinfo") -> list[dict[str, str]]:
    """One dict per logical processor, keys as /proc/cpuinfo spells them."""
    try:
        text = Path(path).read_text()
    except OSError:
        return []
    processors: list[dict[str, str]] = []
    for block in text.strip().split("\n\n"):
        entry: dict[str, str] = {}
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                entry[key.strip()] = value.strip()
        if entry:
            processors.append(entry)
    return processors


def read_lscpu() -> dict[str, str]:
    """``lscpu --json`` as ``{field: data}`` with the trailing colons removed; {} if absent."""
    exe = shutil.which("lscpu")
    if not exe:
        return {}
    try:
        out = subprocess.run(
            [exe, "--json"], capture_output=True, text=True, timeout=10, check=True,
            env={**os.environ, "LC_ALL": "C"},
        ).stdout
        rows = json.loads(out).get("lscpu", [])
    except (OSError, subprocess.SubprocessError, ValueError):
        return {}
    flat: dict[str, str] = {}

    def walk(items: list[dict]) -> None:
        # Newer util-linux nests fields under "children".
        for item in items:
            data = item.get("data")
            if isinstance(data, str):  # a section's heading has none (null)
                flat[str(item.get("field", "")).rstrip(":")] = data
            walk(item.get("children", []))

    walk(rows)
    return flat


def read_caches(cpu_dir: str | Path = "/sys/devices/system/cpu/cpu0/cache") -> list[dict]:
    """Caches seen by cpu0: level, type, size in bytes, which CPUs share it."""
    caches = []
    for index in sorted(Path(cpu_dir).glob("index*")):
        size = _read(index / "size")
        caches.append({
            "level": int(_read(index / "level") or 0),
            "type": _read(index / "type"),
            "size_bytes": _parse_size(size) if size else None,
            "shared_cpu_list": _read(index / "shared_cpu_list"),
        })
    return caches


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _parse_size(text: str) -> int | None:
    units = {"K": 1024, "M": 1024**2, "G": 1024**3}
    text = text.strip().upper().removesuffix("B")
    try:
        if text and text[-1] in units:
            return int(float(text[:-1]) * units[text[-1]])
        return int(text)
    except ValueError:
        return None


def _int(value: object) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def capture_cpu() -> dict:
    procs = read_cpuinfo()
    lscpu = read_lscpu()
    first = procs[0] if procs else {}
    flags = sorted(set((first.get("flags") or first.get("Features") or "").split()))
    if not flags and lscpu.get("Flags"):
        flags = sorted(set(lscpu["Flags"].split()))

    logical = os.cpu_count()
    sockets = _int(lscpu.get("Socket(s)")) or len({p.get("physical id") for p in procs if "physical id" in p}) or None
    cores_per_socket = _int(lscpu.get("Core(s) per socket")) or _int(first.get("cpu cores"))
    threads_per_core = _int(lscpu.get("Thread(s) per core"))
    physical = sockets * cores_per_socket if sockets and cores_per_socket else None
    usable: int | None  # None: neither the affinity nor the count is known
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = logical

    mhz = first.get("cpu MHz") or lscpu.get("CPU max MHz")
    return {
        "architecture": platform.machine() or lscpu.get("Architecture"),
        "vendor": first.get("vendor_id") or lscpu.get("Vendor ID"),
        "model_name": first.get("model name") or lscpu.get("Model name"),
        "family": _int(first.get("cpu family") or lscpu.get("CPU family")),
        "model": _int(first.get("model") or lscpu.get("Model")),
        "stepping": _int(first.get("stepping") or lscpu.get("Stepping")),
        "microcode": first.get("microcode"),
        "mhz": float(mhz) if mhz else None,
        "sockets": sockets,
        "cores_per_socket": cores_per_socket,
        "threads_per_core": threads_per_core,
        "physical_cores": physical,
        "logical_cores": logical,
        "usable_cores": usable,
        "hypervisor": lscpu.get("Hypervisor vendor") or ("unknown" if "hypervisor" in flags else None),
        "key_flags": {flag: flag in flags for flag in KEY_FLAGS},
        "flags": flags,
        "caches": read_caches(),
    }
