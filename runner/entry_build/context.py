"""The build context sent to the engine:

    entry/    the entry folder (code, manifest, Dockerfile, lock)
    wheels/   exactly the wheels the lock pins, hash-checked, hard-linked from the wheelhouse

and the content key that names the resulting image: if any byte of the entry folder
or the base image changes, so does the key (and the image tag).
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path

from runner import paths, safe_read
from runner.manifest.entry_folder import plain_files
from runner.entry_build.wheelhouse import link_into

# Bumped when the way contexts are laid out changes, so old images are not reused.
CONTEXT_FORMAT = "runner-build-context/1"


def entry_files(folder: Path) -> list[Path]:
    """Files that belong in the image, in a stable order (no caches or VCS data); a link
    or special file anywhere in the folder is refused (see ``entry_folder``)."""
    return plain_files(folder)


def _file_digest(path: Path) -> bytes:
    """The sha256 of a file, streamed (``safe_read``: a regular file, never a FIFO or a link)."""
    digest = hashlib.sha256()
    for chunk in safe_read.iter_chunks(path, "data"):
        digest.update(chunk)
    return digest.digest()


def content_key(folder: Path, base_image_id: str, lock_path: Path) -> str:
    digest = hashlib.sha256(f"{CONTEXT_FORMAT}\0{base_image_id}\0".encode())
    for path in entry_files(folder):  # named in UTF-8 (``entry_folder`` refuses other names)
        rel = path.relative_to(folder).as_posix()
        digest.update(f"{rel}\0{path.lstat().st_mode & 0o111}\0".encode())
        digest.update(_file_digest(path))
    digest.update(b"lock\0" + _file_digest(lock_path))
    return digest.hexdigest()


def make_context(folder: Path, wheels: dict[str, Path], lock_path: Path) -> Path:
    root = paths.home() / "build-contexts"
    root.mkdir(parents=True, exist_ok=True)
    context = Path(tempfile.mkdtemp(prefix=f"{folder.name}-", dir=root))
    for path in entry_files(folder):
        target = context / "entry" / path.relative_to(folder)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target, follow_symlinks=False)
    # A lock given from elsewhere (smoke runs) replaces the entry's own at its usual place.
    shutil.copy2(lock_path, context / "entry" / "requirements.lock")
    link_into(wheels, context / "wheels")
    return context


def remove_context(context: Path) -> None:
    shutil.rmtree(context, ignore_errors=True)
