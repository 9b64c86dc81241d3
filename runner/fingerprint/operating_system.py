"""Operating system, kernel and C library of the host."""

from __future__ import annotations

import platform
import socket


def capture_os() -> dict:
    try:
        release = platform.freedesktop_os_release()
    except OSError:
        release = {}
    libc_name, libc_version = platform.libc_ver()
    return {
        "system": platform.system(),
        "kernel": platform.release(),
        "kernel_version": platform.version(),
        "distro": release.get("PRETTY_NAME"),
        "distro_id": release.get("ID"),
        "distro_version": release.get("VERSION_ID"),
        "libc": f"{libc_name} {libc_version}".strip() or None,
        "python": platform.python_version(),
    }


def capture_host_identity() -> dict:
    return {"hostname": socket.gethostname(), "machine": platform.machine()}
