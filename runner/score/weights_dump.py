"""The crossing checkpoint's tensors as the evaluator wrote them, checked against its bytes.

The cross-seed comparison of weights (``runner.score.aligned_weights``) needs the tensors
of each run's crossing checkpoint, and the host never unpickles an entry's files: the
evaluator writes them (``runner.harness.weights``) on the crossing's sensitivity request,
after training, and the runner copies them into ``evaluations/<n>/`` with the answer. The
entry's builder runs in the evaluator's process and could write other tensors than the
checkpoint's (an honest-looking network for a shipped one), so a dump is trusted only when

- every tensor of it (over ``SMALL_BYTES``) occurs byte for byte in the checkpoint the
  runner copied (PyTorch's zip stores its storages raw; MXNet's ``.params`` writes each
  array's data contiguously; a Keras ``.keras`` zip holds an HDF5 file whose small datasets
  are contiguous: zip members are read decompressed), and
- the tensors found cover at least ``MIN_COVERAGE`` of the checkpoint's bytes (or all but
  the format's own overhead, for a small model): a checkpoint that also carries decoy
  tensors for the dump to show cannot hide its real ones, unless they are small.

An untrusted dump is a finding of its own (class 4: the evaluator's copy of the checkpoint is
not the checkpoint), named with the tensor that was not found.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

from runner.entry_outputs import UnsafeEntryFile, copy_limited, open_regular
from runner.harness.weights import channels_last
from runner.plan import EVALUATIONS_DIR
from runner.safe_npy import load_npy

MAX_INDEX_BYTES = 1 << 20
MAX_TENSORS = 4096
MAX_DUMP_BYTES = 256 * 2**20  # the harness's cap (harness/weights.py MAX_BYTES)
MAX_CHECKPOINT_BYTES = 512 * 2**20  # what is searched, zip members decompressed included
SMALL_BYTES = 64  # a smaller tensor may be anywhere (a few zeros): not looked for
MIN_COVERAGE = 0.5
# ... of a checkpoint larger than its tensors and the format's own bytes: a file's headers,
# a pickle or an HDF5 object per tensor (a small model's zip is mostly these)
OVERHEAD_BYTES, OVERHEAD_PER_TENSOR = 16 * 1024, 1024
# How an untrusted copy's reason starts: a finding of its own (class 4), not a gap
FORGED = "the evaluator's copy of the crossing checkpoint is not the checkpoint (the builder runs beside it): "


def copy_dump(outbox: Path, evaluations_dir: Path, index: int) -> dict:
    """Copy answer ``index``'s dump out of the evaluator's outbox (the runner's names, each a
    regular file under the limits); its record: ``{"index": ...}`` relative to the result,
    or ``{"too_large": bytes}``, or ``{"problem": why}``."""
    def copy(relative: str, limit: int) -> Path:
        src, size = open_regular(outbox / relative, limit, f"the evaluator's {relative}")
        target = evaluations_dir / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        with src:
            copy_limited(src, size, target, lambda chunk: None)
        return target

    try:
        index_file = copy(f"{index}/weights.json", MAX_INDEX_BYTES)
        listed = json.loads(index_file.read_text())
        tensors = listed.get("tensors") if isinstance(listed, dict) else None
        if not isinstance(tensors, list) or len(tensors) > MAX_TENSORS:
            return {"problem": "the evaluator's weights.json lists no tensors"}
        if listed.get("too_large") is True:
            return {"too_large": listed.get("bytes") if isinstance(listed.get("bytes"), int) else None}
        left = MAX_DUMP_BYTES + 128 * len(tensors)
        for k in range(len(tensors)):
            left -= copy(f"{index}/weights/{k}.npy", left).stat().st_size
    except (UnsafeEntryFile, OSError, ValueError) as exc:
        return {"problem": f"the checkpoint's tensors could not be copied: {str(exc)[:200]}"}
    return {"index": f"{EVALUATIONS_DIR}/{index}/weights.json", "tensors": len(tensors)}


def load_dump(result_dir: Path, record: dict) -> list[tuple[str, np.ndarray, str, list[int] | None]]:
    """The dumped tensors (name, array as written, dtype, its memory order's axes), in
    checkpoint order; ValueError when malformed."""
    relative = record.get("index") if isinstance(record, dict) else None
    if not isinstance(relative, str) or not relative.startswith(f"{EVALUATIONS_DIR}/") or ".." in relative:
        raise ValueError("no weights index")
    path = result_dir / relative
    if path.stat().st_size > MAX_INDEX_BYTES:
        raise ValueError("weights.json is too large")
    tensors = json.loads(path.read_text()).get("tensors")
    if not isinstance(tensors, list) or len(tensors) > MAX_TENSORS:
        raise ValueError("weights.json lists no tensors")
    found = []
    for k, t in enumerate(tensors):
        array = load_npy(path.parent / "weights" / f"{k}.npy", MAX_DUMP_BYTES)
        if not isinstance(t, dict):
            raise ValueError(f"tensor {k} of weights.json is not a record")
        axes = t.get("axes")
        if axes is not None and axes != list(channels_last(array.ndim)):
            raise ValueError(f"tensor {k}: the only memory order besides C's is channels-last, not {axes}")
        if list(in_order(array, axes).shape) != t.get("shape"):
            raise ValueError(f"tensor {k} is not the shape weights.json gives")
        found.append((str(t.get("name")), array, str(t.get("dtype")), axes))
    return found


def in_order(array: np.ndarray, axes: list[int] | None) -> np.ndarray:
    """A tensor written in its memory order (``axes``), in its own axes' order again."""
    return np.transpose(array, np.argsort(axes)) if axes else array


def as_float(array: np.ndarray, dtype) -> np.ndarray:
    """bfloat16 is written as its raw 16-bit words: widened here to float32 (exactly)."""
    if dtype == "bfloat16" and array.dtype == np.uint16:
        return (array.astype(np.uint32) << 16).view(np.float32)
    return array


def haystacks(checkpoint: Path) -> list[bytes]:
    """The checkpoint's bytes, and each member of it decompressed when it is a zip."""
    data = checkpoint.read_bytes()[:MAX_CHECKPOINT_BYTES]
    found = [data]
    left = MAX_CHECKPOINT_BYTES - len(data)
    try:
        with zipfile.ZipFile(checkpoint) as archive:
            for info in archive.infolist():
                if info.compress_type != zipfile.ZIP_STORED and 0 < info.file_size <= left:
                    found.append(archive.read(info))
                    left -= info.file_size
    except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError, RuntimeError, EOFError):
        pass
    return found


def untrusted(tensors: list[tuple[str, np.ndarray, str, list[int] | None]], checkpoint: Path) -> str | None:
    """Why the dump (``load_dump``) is not the checkpoint's; None when it is."""
    try:
        places = haystacks(checkpoint)
    except OSError as exc:
        return f"the runner's copy of the crossing checkpoint cannot be read ({exc.strerror})"
    covered = 0
    for name, array, _, _ in tensors:
        data = np.ascontiguousarray(array).tobytes()
        if len(data) < SMALL_BYTES:
            continue
        if not any(data in place for place in places):
            return f"tensor {name!r} {list(array.shape)} of the evaluator's copy does not occur in the checkpoint file"
        covered += len(data)
    size = sum(len(p) for p in places[1:]) or len(places[0])
    overhead = OVERHEAD_BYTES + OVERHEAD_PER_TENSOR * len(tensors)
    if size and covered / size < MIN_COVERAGE and size - covered > overhead:
        return (f"the evaluator's copy covers {covered / size:.0%} of the checkpoint's {size:,} bytes "
                f"(at least {MIN_COVERAGE:.0%}): the checkpoint holds tensors it did not show")
    return None


def read_checked(result_dir: Path, record: object, checkpoint: Path) -> tuple[list[tuple[str, np.ndarray]] | None, str | None]:
    """(the crossing checkpoint's tensors, None) when the dump is the checkpoint's, else
    (None, why not)."""
    if not isinstance(record, dict):
        return None, "the evaluator wrote no copy of its tensors (a result from before this check)"
    if "too_large" in record:
        return None, f"not compared: weights too large ({record['too_large']} bytes, limit {MAX_DUMP_BYTES:,})"
    if record.get("problem"):
        return None, str(record["problem"])
    try:
        tensors = load_dump(result_dir, record)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return None, f"the evaluator's copy of the tensors is unreadable: {str(exc)[:160]}"
    if why := untrusted(tensors, checkpoint):
        return None, FORGED + why
    return [(name, as_float(in_order(array, axes), dtype)) for name, array, dtype, axes in tensors], None
