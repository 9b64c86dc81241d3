"""Weight provenance: what the loaded model computes with must come from its checkpoint.

An entry that ships a network trained beforehand can hide it anywhere the builder reaches
(a constant in ``model.py``, a plain attribute, a closure, a module global) and load an
empty or meaningless checkpoint. The evaluator therefore records, while it computes the
scored predictions, every tensor the forward pass *uses* that the pass did not itself
produce from the input (each framework's loader says how it sees them), and every tensor
held by the model object. Each must equal a tensor of the checkpoint file, compared by
content digest after normalisation (flattened in logical order; a floating tensor may be
the checkpoint's at a lower precision, e.g. an fp16 copy of fp32 weights), or be a small
constant: at most ``PER_TENSOR_BYTES`` each and ``TOTAL_BYTES`` in all (normalisation
constants and the like; the figures are the run contract's).

What is recorded goes to ``OUT/<n>/provenance.json``; the host judges it. The record is
written by a process that also runs the entry's builder, so it is evidence, not proof:
the threat model says what that leaves open and what backs it (the blob scan, the
checkpoint-sensitivity check the host scores itself, the signed entry files).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

PER_TENSOR_BYTES = 4 * 1024
TOTAL_BYTES = 64 * 1024
FORMAT = 1
LISTED = 50  # foreign tensors named in the record; the rest are counted
# A framework's gradient buffers live beside the weights and are never read by a forward pass.
GRADIENT_ATTRIBUTES = {"grad", "_grad"}


def content_digest(values: np.ndarray) -> str:
    """Digest of a tensor's values in logical order, whatever its shape or memory layout."""
    flat = np.ascontiguousarray(values).reshape(-1)
    kind = "f" if flat.dtype.kind == "f" else "i" if flat.dtype.kind in "iub" else flat.dtype.str
    h = hashlib.sha256(kind.encode() + b"\0")
    h.update(flat.tobytes())
    return h.hexdigest()


@dataclass
class Ledger:
    """The checkpoint's tensors by digest, and every tensor the model was seen to use or hold.

    ``normalise(value, precision)`` turns a framework tensor into a numpy array of its
    values at ``precision`` ("float16", "bfloat16", ... or None for its own), as float32
    for floating tensors and int64 for integer ones: two tensors are the same tensor when
    those arrays are equal.
    """

    checkpoint: dict[str, object]
    normalise: Callable[[object, str | None], np.ndarray]
    _by_precision: dict[str | None, dict[str, str]] = field(default_factory=dict)
    _seen: dict[str, dict] = field(default_factory=dict)  # digest -> record

    def _checkpoint_digests(self, precision: str | None) -> dict[str, str]:
        if precision not in self._by_precision:
            found: dict[str, str] = {}
            for name, value in self.checkpoint.items():
                found.setdefault(content_digest(self.normalise(value, precision)), name)
            self._by_precision[precision] = found
        return self._by_precision[precision]

    def note(self, value, where: str, precision: str | None, nbytes: int, shape: tuple, dtype: str) -> str | None:
        """Record one tensor the model used or holds; return the checkpoint name it matches."""
        values = self.normalise(value, None)
        digest = content_digest(values)
        if digest in self._seen:
            return self._seen[digest].get("matches")
        match = self._checkpoint_digests(precision).get(digest)
        if match is None and values.ndim == 2:  # a transposed 2-D weight (x @ W.T kept as W.T)
            match = self._checkpoint_digests(precision).get(content_digest(values.T))
        if match is None and values.size > 1 and (values.reshape(-1) == values.reshape(-1)[0]).all():
            nbytes = values.itemsize  # one value repeated (zeros, a fill) holds one number
        self._seen[digest] = {"name": where, "shape": list(shape), "dtype": dtype, "bytes": int(nbytes),
                              "matches": match}
        return match

    def record(self) -> dict:
        """What the host judges: the foreign tensors (named, with sizes) and the budget."""
        foreign = [r for r in self._seen.values() if r["matches"] is None]
        small = [r for r in foreign if r["bytes"] <= PER_TENSOR_BYTES]
        small_bytes = sum(r["bytes"] for r in small)
        over = [r for r in foreign if r["bytes"] > PER_TENSOR_BYTES]
        if small_bytes > TOTAL_BYTES:  # small constants past the total budget count too
            over += sorted(small, key=lambda r: -r["bytes"])
        over.sort(key=lambda r: -r["bytes"])
        return {
            "format": FORMAT,
            "checkpoint_tensors": len(self.checkpoint),
            "tensors_seen": len(self._seen),
            "matched": len(self._seen) - len(foreign),
            "small_constants": {"count": len(small), "bytes": small_bytes},
            "budget": {"per_tensor_bytes": PER_TENSOR_BYTES, "total_bytes": TOTAL_BYTES},
            "foreign_count": len(over),
            "foreign_bytes": sum(r["bytes"] for r in over),
            "foreign": [{k: r[k] for k in ("name", "shape", "dtype", "bytes")} for r in over[:LISTED]],
        }


def normalise_array(array: np.ndarray, precision: str | None) -> np.ndarray:
    """A numpy tensor's values for the ledger (for frameworks whose tensors convert to numpy):
    floating ones at ``precision`` first, then float32; integer ones as int64."""
    if array.dtype.kind == "f":
        if precision not in (None, "float32", "float64"):
            array = array.astype(precision)
        return array.astype(np.float32)
    return array.astype(np.int64) if array.dtype.kind in "iub" else array


def note_array(ledger: Ledger, array: np.ndarray, where: str) -> None:
    """Note one numpy tensor (numbers only) at its own precision."""
    if array.dtype.kind not in "fiub" or array.size == 0:
        return
    precision = str(array.dtype) if array.dtype.kind == "f" else None
    ledger.note(array, where, precision, array.nbytes, tuple(array.shape), str(array.dtype))


def walk_held(root, is_tensor, limit: int = 100_000):
    """``(path, tensor)`` for every tensor reachable from ``root`` through attributes,
    lists, tuples, dicts and sets (not through modules of Python itself), each object once."""
    seen: set[int] = set()
    stack = [("model", root)]
    visited = 0
    while stack and visited < limit:
        path, obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        visited += 1
        try:
            tensor = is_tensor(obj)
        except Exception:  # an object whose attributes cannot be read holds nothing we can see
            continue
        if tensor:
            yield path, obj
            continue
        if isinstance(obj, np.ndarray):
            if obj.dtype.kind in "fiub" and obj.size:
                yield path, obj
            continue
        if isinstance(obj, (str, bytes, int, float, bool, type(None), type)) or callable(obj) and not hasattr(obj, "__dict__"):
            continue
        if isinstance(obj, dict):
            stack.extend((f"{path}[{k!r}]", v) for k, v in list(obj.items())[:10_000])
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend((f"{path}[{i}]", v) for i, v in enumerate(list(obj)[:10_000]))
        else:
            attrs = getattr(obj, "__dict__", None)
            if isinstance(attrs, dict) and type(obj).__module__ not in ("builtins",):
                stack.extend((f"{path}.{k}", v) for k, v in list(attrs.items())[:10_000]
                             if k not in GRADIENT_ATTRIBUTES)
            closure = getattr(obj, "__closure__", None)
            for i, cell in enumerate(closure or ()):
                try:
                    stack.append((f"{path}.<closure {i}>", cell.cell_contents))
                except ValueError:
                    pass
