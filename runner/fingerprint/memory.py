"""Host memory: what the kernel reports, and any cgroup limit on this process."""

from __future__ import annotations

from pathlib import Path


def read_meminfo(path: str | Path = "/proc/meminfo") -> dict[str, int]:
    """/proc/meminfo in bytes (the file's kB are KiB)."""
    values: dict[str, int] = {}
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return values
    for line in lines:
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            scale = 1024 if len(parts) > 1 and parts[1].lower() == "kb" else 1
            values[key.strip()] = int(parts[0]) * scale
    return values


def _cgroup_memory_limit() -> int | None:
    """cgroup v2 ``memory.max`` (or v1 ``limit_in_bytes``); None when unlimited."""
    for candidate in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(candidate).read_text().strip()
        except OSError:
            continue
        if text == "max":
            return None
        limit = int(text)
        # v1 reports "unlimited" as a huge page-aligned number.
        return None if limit >= 1 << 60 else limit
    return None


def capture_memory() -> dict:
    info = read_meminfo()
    return {
        "total_bytes": info.get("MemTotal"),
        "available_bytes": info.get("MemAvailable"),
        "swap_total_bytes": info.get("SwapTotal"),
        "hugepages_total": info.get("HugePages_Total"),
        "cgroup_limit_bytes": _cgroup_memory_limit(),
    }
