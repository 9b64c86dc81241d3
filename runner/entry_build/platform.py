"""The one target every entry image's wheels are chosen for: CPython 3.11 on x86-64
Linux with glibc 2.36 (Debian bookworm), so the host's own Python never matters."""

from __future__ import annotations

PYTHON_VERSION = "3.11"
GLIBC_MINOR = 36  # bookworm's glibc 2.36

# pip (< 24) does not expand manylinux_2_x to the older tags a glibc also accepts,
# so every compatible tag is listed, newest first, as the interpreter itself would.
PLATFORM_TAGS = [
    *(f"manylinux_2_{minor}_x86_64" for minor in range(GLIBC_MINOR, 4, -1)),
    "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64",
    "linux_x86_64",
]

PIP_TARGET_FLAGS = [
    "--only-binary=:all:",
    *(arg for tag in PLATFORM_TAGS for arg in ("--platform", tag)),
    "--implementation", "cp",
    "--python-version", PYTHON_VERSION,
    "--abi", "cp311",
]
