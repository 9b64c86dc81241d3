"""A content-addressed wheelhouse on the host, shared by every entry.

Each wheel lives at ``<wheelhouse>/sha256/<digest>/<filename>``: a lock's hash is the
wheel's address, so a wheel is downloaded once for all entries that pin it. Wheels are
fetched with the host's pip (whose configuration, find-links and CA apply) for the
entry-image platform, never for the host's own Python, and every file is re-hashed
against the lock each time it is used, so a wheel changed on disk is refused.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from runner import paths
from runner.entry_build.lockfile import Pin
from runner.entry_build.platform import PIP_TARGET_FLAGS
from runner.digests import sha256_file
from runner.errors import UserError
from runner.report import reporter

DOWNLOAD_TIMEOUT_S = 30 * 60


def wheel_path(digest: str, root: Path | None = None) -> Path | None:
    """The stored file with this digest, if any (its folder holds exactly one file)."""
    folder = (root or paths.wheelhouse_dir()) / "sha256" / digest
    files = sorted(folder.iterdir()) if folder.is_dir() else []
    return files[0] if files else None


def _find_stored(pin: Pin, root: Path) -> Path | None:
    for digest in pin.hashes:
        stored = wheel_path(digest, root)
        if stored is not None:
            return stored
    return None


def verify(pin: Pin, path: Path) -> None:
    actual = sha256_file(path)
    if actual not in pin.hashes:
        raise UserError(
            f"wheel {path} for {pin.name}=={pin.version} (lock line {pin.line}) has sha256 "
            f"{actual[:16]}..., which the lock does not allow: the file was changed after download",
            f"delete it (rm -r {path.parent}) and build again to download it afresh",
        )


def resolve(pins: list[Pin], root: Path | None = None) -> dict[str, Path]:
    """Make sure every pin has a verified wheel in the wheelhouse; return key -> path."""
    root = root or paths.wheelhouse_dir()
    found: dict[str, Path] = {}
    missing: list[Pin] = []
    for pin in pins:
        stored = _find_stored(pin, root)
        if stored is None:
            missing.append(pin)
        else:
            found[pin.key] = stored
    with reporter().phase("wheelhouse", f"{len(found)} of {len(pins)} wheels stored") as phase:
        if missing:
            phase.update(f"downloading {len(missing)} wheels with pip", step=True)
            found.update(_download(missing, root))
        size = sum(path.stat().st_size for path in found.values())
        phase.update(f"verifying {len(found)} wheels (sha256)", done=0, total=size, in_bytes=True, step=True)
        for pin in pins:
            if pin.key in found:
                verify(pin, found[pin.key])
                phase.advance(found[pin.key].stat().st_size)
    for pin in pins:
        if pin.key not in found and not pin.marker:  # a pin with a marker may not apply to the image platform
            raise UserError(
                f"pip found no wheel for {pin.name}=={pin.version} for CPython 3.11 on manylinux x86_64",
                "pin a version that publishes such a wheel, or add it to pip's find-links",
            )
    return found


def _download(pins: list[Pin], root: Path) -> dict[str, Path]:
    (root / "sha256").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="download-", dir=root) as tmp:
        lock = Path(tmp) / "missing.lock"
        lock.write_text("".join(pin.requirement_line() + "\n" for pin in pins))
        target = Path(tmp) / "files"
        command = [
            sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes",
            "--disable-pip-version-check", "--progress-bar", "off", *PIP_TARGET_FLAGS,
            "-r", str(lock), "-d", str(target),
        ]
        try:
            proc = subprocess.run(command, capture_output=True, text=True, check=False,
                                  timeout=DOWNLOAD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise UserError(
                f"downloading {len(pins)} wheels took longer than {DOWNLOAD_TIMEOUT_S // 60} minutes",
                "check the host's connection to the package index",
            ) from None
        if proc.returncode != 0:
            raise UserError(
                f"pip could not download the locked wheels: {_pip_reason(proc.stderr)}",
                "check the pins exist for CPython 3.11 manylinux x86_64 and the index is reachable",
            )
        by_digest = {digest: pin for pin in pins for digest in pin.hashes}
        stored: dict[str, Path] = {}
        for file in sorted(target.iterdir()):
            digest = sha256_file(file)
            pin = by_digest.get(digest)
            if pin is None:  # pip --require-hashes should already have refused this
                raise UserError(f"pip downloaded {file.name}, whose sha256 no pin allows",
                                "regenerate the lock")
            folder = root / "sha256" / digest
            folder.mkdir(parents=True, exist_ok=True)
            final = folder / file.name
            file.chmod(0o444)
            os.replace(file, final)
            stored[pin.key] = final
    return stored


def _pip_reason(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR")] or lines[-2:]
    return " ".join(errors)[:400] or "no output"


def link_into(wheels: dict[str, Path], folder: Path) -> None:
    """Place exactly these wheels in ``folder`` (hard links; copies across file systems)."""
    folder.mkdir(parents=True, exist_ok=True)
    for source in wheels.values():
        link = folder / source.name
        try:
            os.link(source, link)
        except OSError:
            shutil.copy2(source, link)
