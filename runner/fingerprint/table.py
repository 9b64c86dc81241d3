"""A fingerprint as readable rich tables (``runner fingerprint`` without ``--format json``)."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table

from runner.frameworks import FRAMEWORKS, Framework


def _gib(n: int | None) -> str:
    return "-" if n is None else f"{n / 1024**3:.1f} GiB"


def _v(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _pairs(title: str, rows: list[tuple[str, object]]) -> Table:
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    for key, value in rows:
        table.add_row(key, _v(value))
    return table


def _framework_rows(framework: Framework, image: dict) -> list[tuple[str, object]]:
    """The framework's rows as it declares them: one key's value, or several keys' "a / b";
    an image without the framework shows "-"."""
    info = image.get(framework.module) or {}
    rows = []
    for label, keys in framework.rows:
        if len(keys) == 1:
            rows.append((label, info.get(keys[0])))
        else:
            rows.append((label, " / ".join(_v(info.get(key)) for key in keys) if info else None))
    return rows


def render(fingerprint: dict) -> Group:
    cpu, mem, osinfo = fingerprint["cpu"], fingerprint["memory"], fingerprint["os"]
    gpu, docker = fingerprint["gpu"], fingerprint.get("docker") or {}
    present = [flag for flag, has in (cpu.get("key_flags") or {}).items() if has]
    caches = ", ".join(
        f"L{c['level']} {c['type']} {c['size_bytes'] // 1024} KiB" for c in cpu.get("caches", []) if c.get("size_bytes")
    )
    parts = [
        _pairs("Host", [
            ("hostname", fingerprint["host"].get("hostname")),
            ("captured at", fingerprint.get("captured_at")),
            ("OS", osinfo.get("distro")),
            ("kernel", osinfo.get("kernel")),
            ("libc", osinfo.get("libc")),
        ]),
        _pairs("CPU", [
            ("model", cpu.get("model_name")),
            ("vendor / family / model", f"{cpu.get('vendor')} / {cpu.get('family')} / {cpu.get('model')}"),
            ("sockets x cores x threads", f"{cpu.get('sockets')} x {cpu.get('cores_per_socket')} x {cpu.get('threads_per_core')}"),
            ("logical cores (usable)", f"{cpu.get('logical_cores')} ({cpu.get('usable_cores')})"),
            ("hypervisor", cpu.get("hypervisor")),
            ("key flags", " ".join(present) or None),
            ("caches", caches or None),
        ]),
        _pairs("Memory", [
            ("total", _gib(mem.get("total_bytes"))),
            ("available", _gib(mem.get("available_bytes"))),
            ("cgroup limit", _gib(mem.get("cgroup_limit_bytes")) if mem.get("cgroup_limit_bytes") else "none"),
        ]),
    ]
    if gpu.get("driver") is None:
        parts.append(_pairs("GPUs", [("NVIDIA driver", gpu.get("note") or "none")]))
    else:
        table = Table(title=f"GPUs (driver {gpu['driver']}, CUDA {gpu.get('cuda_driver')})", title_justify="left")
        for column in ("#", "name", "memory", "CC", "PCIe", "NVLink", "MIG", "ECC", "power limit", "UUID"):
            table.add_column(column)
        for g in gpu.get("gpus", []):
            pcie = g.get("pcie") or {}
            table.add_row(
                str(g["index"]), _v(g.get("name")), _gib(g.get("memory_total_bytes")),
                _v(g.get("compute_capability")),
                f"Gen{_v(pcie.get('max_generation'))} x{_v(pcie.get('max_width'))}",
                _v((g.get("nvlink") or {}).get("active_links")),
                _v((g.get("mig") or {}).get("enabled")), _v((g.get("ecc") or {}).get("enabled")),
                f"{g['power_limit_w']:.0f} W" if g.get("power_limit_w") else "-",
                _v(g.get("uuid")),
            )
        parts.append(table)
    parts.append(_pairs("Docker", [
        ("engine", docker.get("version") or docker.get("note")),
        ("runtimes", ", ".join(docker.get("runtimes") or []) or None),
        ("NVIDIA runtime", docker.get("nvidia_runtime")),
    ]))
    image = fingerprint.get("image")
    if image:
        parts.append(_pairs(f"Image {image.get('ref')}", [
            ("id", image.get("id")),
            ("python", image.get("python")),
            *(row for framework in FRAMEWORKS.values() for row in _framework_rows(framework, image)),
            ("onnxruntime", (image.get("onnxruntime") or {}).get("version")),
            ("tensorrt", (image.get("tensorrt") or {}).get("version")),
        ]))
    return Group(*parts)
