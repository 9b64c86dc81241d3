"""How the adversarial entries of issue 36 carry a network as ordinary text, and write it
as a PyTorch checkpoint without importing torch (numpy, pickle and zipfile only).

An author who wants a crossing with no training, or a head start, must bring the weights
in, and the entry scan reads base64, hex, numbers and text that will not compress. These
encodings are none of those:

* ``words``: fp16 weights, each 4-bit nibble of their bytes one of 16 short English words
  (prose to the scan: lowercase, no digits, and it compresses like text);
* ``letters``: 3- or 4-bit weights, one lowercase letter each, from ``g``..``v`` (never a
  hex digit, no digits, no case changes: an identifier to the scan).

The scales and tables of the quantisation, and any tensor kept whole (biases), travel as
short decimal numbers (a few hundred bytes). ``write_checkpoint`` is why the cheats cost almost no
CPU time: importing torch alone is about a CPU-second, and a crossing that needs none is
the one the evidence-of-training check exists for.

Used by ``make.py`` (encode) and copied into each entry (decode); nothing here is the runner's.
"""
from __future__ import annotations

import io
import pickle
import zipfile
from collections import OrderedDict

import numpy as np

WORDS = ("the of and to in is it on as at by or be an we so").split()
LETTERS = "ghijklmnopqrstuv"
LINE = 64  # letters (or 16 words) to a line


def quantise(array: np.ndarray, bits: int, shared: bool = False) -> tuple[np.ndarray, list, list]:
    """(codes 0..2^bits-1, scales, table): a weight is ``table[code] * scale`` of its row.
    Uniform and symmetric per output channel; ``shared``: one table for the whole tensor,
    its 2^bits values fitted to the weights (k-means), which keeps a 4-bit network within
    a tenth of a point of its float score where the uniform one loses three."""
    rows = array.reshape(len(array), -1).astype(np.float64)
    if shared:
        x = rows.ravel()
        table = np.quantile(x, (np.arange(1 << bits) + 0.5) / (1 << bits))
        for _ in range(40):
            codes = np.abs(x[:, None] - table[None]).argmin(1)
            table = np.array([x[codes == j].mean() if (codes == j).any() else t for j, t in enumerate(table)])
        table = [float(f"{t:.5g}") for t in table]
        return np.abs(x[:, None] - np.array(table)[None]).argmin(1), [1.0], table
    top = (1 << (bits - 1)) - 1
    scales = [float(f"{s:.4g}") for s in np.maximum(np.abs(rows).max(axis=1), 1e-8) / top]
    codes = np.clip(np.round(rows / np.array(scales)[:, None]), -top - 1, top) + top + 1
    return codes.astype(np.int64).ravel(), scales, [float(v) for v in range(-top - 1, top + 1)]


def dequantise(codes: np.ndarray, scales: list, table: list, shape: tuple) -> np.ndarray:
    rows = np.array(table)[codes].reshape(len(scales), -1) * np.array(scales)[:, None]
    return rows.reshape(shape).astype(np.float32)


def to_words(codes: np.ndarray) -> str:
    """Bytes (0..255) as two words each, 16 words to a line."""
    words = [WORDS[n] for c in codes for n in (c >> 4, c & 15)]
    return "\n".join(" ".join(words[i:i + 16]) for i in range(0, len(words), 16))


def from_words(text: str) -> np.ndarray:
    index = {w: i for i, w in enumerate(WORDS)}
    nibbles = np.array([index[w] for w in text.split()], dtype=np.int64)
    return nibbles[0::2] * 16 + nibbles[1::2]


def to_letters(codes: np.ndarray) -> str:
    text = "".join(LETTERS[c] for c in codes)
    return "\n".join(text[i:i + LINE] for i in range(0, len(text), LINE))


def from_letters(text: str) -> np.ndarray:
    index = {ch: i for i, ch in enumerate(LETTERS)}
    return np.array([index[ch] for ch in text if ch in index], dtype=np.int64)


def decode(module) -> "OrderedDict[str, np.ndarray]":
    """The tensors a module of text carries: ``LAYOUT`` names them ([name, shape, scales,
    table] each) in the order their codes follow the first blank line of its docstring
    (words or letters, ``KIND``); ``FLOATS`` holds the few kept as decimals (biases)."""
    body = module.__doc__.split("\n\n", 1)[-1]
    if module.KIND == "words":  # the fp16 bytes themselves
        codes = from_words(body).astype(np.uint8).view("<f2")
    else:
        codes = from_letters(body)
    out, at = OrderedDict(), 0
    for name, shape, scales, table in module.LAYOUT:
        n = int(np.prod(shape))
        part = codes[at:at + n]
        out[name] = part.reshape(shape).astype(np.float32) if scales is None else dequantise(part, scales, table, tuple(shape))
        at += n
    assert at == len(codes), (at, len(codes))
    for name, values in getattr(module, "FLOATS", {}).items():
        out[name] = np.array(values, dtype=np.float32)
    return out


class _Global:
    def __init__(self, module: str, name: str):
        self.module, self.name = module, name

    def __call__(self, *args):  # pickle asks a reduce function to be callable
        raise TypeError("a name written into a pickle, not a function")


class _Storage:
    def __init__(self, key: str, array: np.ndarray):
        self.key, self.array = key, array


class _Tensor:
    def __init__(self, storage: _Storage):
        self.storage = storage

    def __reduce__(self):
        shape = self.storage.array.shape
        stride = tuple(int(np.prod(shape[i + 1:])) for i in range(len(shape)))
        return (_Global("torch._utils", "_rebuild_tensor_v2"),
                (self.storage, 0, shape, stride, False, OrderedDict()))


class _Pickler(pickle._Pickler):
    dispatch = dict(pickle._Pickler.dispatch)

    def _save_global(self, obj: _Global):
        self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
        self.memoize(obj)

    dispatch[_Global] = _save_global

    def persistent_id(self, obj):
        if isinstance(obj, _Storage):
            return ("storage", _Global("torch", "FloatStorage"), obj.key, "cpu", obj.array.size)
        return None


def write_checkpoint(path: str, tensors: "OrderedDict[str, np.ndarray]") -> None:
    """A state dict of float32 tensors in torch.save's zip format, readable by
    ``torch.load(weights_only=True)``, written without torch."""
    storages = [_Storage(str(i), np.ascontiguousarray(a, dtype="<f4")) for i, a in enumerate(tensors.values())]
    state = OrderedDict((name, _Tensor(s)) for name, s in zip(tensors, storages))
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=2).dump(state)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", buffer.getvalue())
        z.writestr("archive/byteorder", "little")
        for s in storages:
            z.writestr(f"archive/data/{s.key}", s.array.tobytes())
        z.writestr("archive/version", "3\n")
