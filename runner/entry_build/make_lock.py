"""Regenerate an entry's hash-pinned lock from its top-level requirements.

    python -m runner.entry_build.make_lock entries/NAME/requirements.in > entries/NAME/requirements.lock

Resolves the full dependency set with ``pip download`` for the entry-image platform (see
``runner.entry_build.platform``; the host's pip configuration, e.g. find-links, applies), then
pins every downloaded wheel to its version and the sha256 of the file pip chose.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

from runner.entry_build.lockfile import normalise_name
from runner.entry_build.platform import PIP_TARGET_FLAGS


def wheel_name_version(filename: str) -> tuple[str, str]:
    name, version = filename.split("-")[:2]
    return name, version


def lock_text(requirements_in: Path) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", *PIP_TARGET_FLAGS,
             "-r", str(requirements_in), "-d", tmp],
            check=True, stdout=sys.stderr,
        )
        lines = []
        for wheel in sorted(Path(tmp).glob("*.whl"), key=lambda p: normalise_name(p.name)):
            name, version = wheel_name_version(wheel.name)
            digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
            lines.append(f"{normalise_name(name)}=={version} \\\n    --hash=sha256:{digest}")
    header = (
        f"# Hash-pinned lock (pip --require-hashes format), generated from {requirements_in.name} by\n"
        f"#   python -m runner.entry_build.make_lock {requirements_in} > requirements.lock\n"
        "# for CPython 3.11 / manylinux x86_64. Edit requirements.in, never this file.\n"
    )
    return header + "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("requirements_in", type=Path)
    args = parser.parse_args(argv)
    sys.stdout.write(lock_text(args.requirements_in))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
