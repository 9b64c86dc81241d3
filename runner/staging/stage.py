"""Writing a staged data set atomically, with its ``staged.json``.

Everything is written into a temporary folder beside the target and renamed into place
only once complete, with ``staged.json`` (the record a reader trusts) written last. An
interrupted prepare therefore leaves either the previous set or nothing, never a
half-written set that looks valid.

Arrays are saved with ``numpy.lib.format`` version 1.0, C order and a fixed dtype, so
the same data always gives the same bytes and the same sha256.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from types import TracebackType

import numpy as np

from runner.engine.disk import disk_full, out_of_space
from runner.errors import UserError
from runner.staging.checks import file_digest

STAGED_JSON = "staged.json"
FORMAT = 1
NPY_VERSION = (1, 0)
TMP_MARK = ".staging-"
OLD_MARK = ".replaced-"


def data_digest(files: dict[str, str]) -> str:
    """One digest for the whole set: sha256 over ``<sha256>  <relpath>`` lines, sorted."""
    lines = "".join(f"{files[rel]}  {rel}\n" for rel in sorted(files))
    return "sha256:" + hashlib.sha256(lines.encode()).hexdigest()


def save_array(path: Path, array: np.ndarray, dtype: str) -> None:
    """Save ``array`` as ``dtype`` in C order with a fixed .npy format version."""
    arr = np.ascontiguousarray(array, dtype=np.dtype(dtype))
    with open(path, "wb") as fh:
        np.lib.format.write_array(fh, arr, version=NPY_VERSION, allow_pickle=False)


def save_classification(
    stage: Stage,
    train_x: np.ndarray,
    train_y: np.ndarray,
    eval_x: np.ndarray,
    eval_y: np.ndarray,
) -> None:
    """Stage an image classification set in the layout every such task uses: uint8 images
    and int64 labels, the evaluation labels kept host-only under ``labels/``."""
    stage.save_array("train/images.npy", train_x, "uint8")
    stage.save_array("train/labels.npy", train_y, "int64")
    stage.save_array("eval/images.npy", eval_x, "uint8")
    stage.save_array("labels/eval_labels.npy", eval_y, "int64")
    stage.counts = {"train": len(train_x), "eval": len(eval_x)}


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale(parent: Path, task: str) -> None:
    """Drop temp folders left by a staging process that died (its pid is in the name)."""
    for mark in (TMP_MARK, OLD_MARK):
        for leftover in parent.glob(f".{task}{mark}*"):
            try:
                pid = int(leftover.name[len(f".{task}{mark}") :].split("-")[0])
            except ValueError:
                continue
            if not _pid_alive(pid):
                shutil.rmtree(leftover, ignore_errors=True)


class Stage:
    """A data set being staged into ``target``; use as a context manager.

    On a clean exit the files are hashed, ``staged.json`` is written and the folder is
    renamed to ``target`` (replacing an older set). On an exception the temp folder is
    removed and ``target`` is left as it was.
    """

    def __init__(
        self,
        task: str,
        target: Path,
        *,
        source: str,
        source_digest: str | None,
        conforming: bool,
        details: dict | None = None,
        pinned: dict[str, str] | None = None,
    ):
        self.task = task
        self.target = Path(target)
        self.source = source
        self.source_digest = source_digest
        self.conforming = conforming
        self.details = dict(details or {})
        self.pinned = dict(pinned or {})  # relpath -> sha256 the staged file must have
        self.counts: dict[str, int] = {}
        self.tmp: Path | None = None

    # -- where things go ----------------------------------------------------------
    def path(self, rel: str) -> Path:
        assert self.tmp is not None, "use Stage as a context manager"
        p = self.tmp / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def save_array(self, rel: str, array: np.ndarray, dtype: str) -> Path:
        p = self.path(rel)
        save_array(p, array, dtype)
        return p

    def open_array(self, rel: str, shape: tuple[int, ...], dtype: str) -> np.memmap:
        """A writable memmap backed by the .npy file, for sets too big for memory."""
        return np.lib.format.open_memmap(
            self.path(rel), mode="w+", dtype=np.dtype(dtype), shape=shape, version=NPY_VERSION
        )

    def write_text(self, rel: str, text: str) -> Path:
        p = self.path(rel)
        p.write_text(text, encoding="utf-8")
        return p

    # -- lifecycle ----------------------------------------------------------------
    def __enter__(self) -> "Stage":
        parent = self.target.parent
        parent.mkdir(parents=True, exist_ok=True)
        remove_stale(parent, self.target.name)
        self.tmp = Path(
            tempfile.mkdtemp(prefix=f".{self.target.name}{TMP_MARK}{os.getpid()}-", dir=parent)
        )
        os.chmod(self.tmp, 0o755)  # mkdtemp makes it private; the inputs are meant to be mounted
        for sub in ("train", "eval", "labels"):
            (self.tmp / sub).mkdir()
        os.chmod(self.tmp / "labels", 0o700)  # host-only: only the runner's user reads labels
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self.tmp is not None
        if exc_type is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            if exc is not None and out_of_space(exc):  # the runner's own disk, not the engine's: say which
                raise disk_full(self.target.parent, f"staging {self.task}", exc) from None
            return
        try:
            self._commit()
        except BaseException as err:
            shutil.rmtree(self.tmp, ignore_errors=True)
            if out_of_space(err):
                raise disk_full(self.target.parent, f"staging {self.task}", err) from None
            raise

    def _commit(self) -> None:
        assert self.tmp is not None
        files = {
            p.relative_to(self.tmp).as_posix(): file_digest(p, show=True)
            for p in sorted(self.tmp.rglob("*"))
            if p.is_file()
        }
        self._check_pinned(files)
        sizes = {rel: (self.tmp / rel).stat().st_size for rel in files}
        record = {
            "format": FORMAT,
            "task": self.task,
            "source": self.source,
            "source_digest": self.source_digest,
            "conforming": self.conforming,
            "counts": self.counts,
            "files": files,
            "sizes": sizes,
            "digest": data_digest(files),
            "staged_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **({"details": self.details} if self.details else {}),
        }
        for rel in files:
            os.chmod(self.tmp / rel, 0o444)  # the set is read-only once staged
        staged_json = self.tmp / STAGED_JSON
        with open(staged_json, "w") as fh:
            json.dump(record, fh, indent=2, sort_keys=True)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        self._swap_into_place()

    def _check_pinned(self, files: dict[str, str]) -> None:
        for rel, want in sorted(self.pinned.items()):
            got = files.get(rel)
            if got != want:
                raise UserError(
                    f"{self.task} {rel} from {self.source} does not match the pinned array "
                    f"(sha256 {got}, expected {want}); the source data differ from the reference",
                    "check that the source is the pinned release; nothing was staged",
                )

    def _swap_into_place(self) -> None:
        assert self.tmp is not None
        old = None
        if self.target.exists():
            old = self.target.parent / f".{self.target.name}{OLD_MARK}{os.getpid()}-{time.time_ns()}"
            os.rename(self.target, old)
        os.rename(self.tmp, self.target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
