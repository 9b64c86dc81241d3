"""Load a ``.npy`` file someone else wrote without trusting its header.

``numpy.load`` believes the header: a 100-byte file claiming 8 TB of data makes it try to
allocate 8 TB, and an object dtype needs pickle. Here the header is read with a size
limit, the dtype must be a plain numeric one, and the shape's byte count must match the
file's size before any data is read.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format

MAX_HEADER_BYTES = 64 * 1024
MAX_ARRAY_BYTES = 8 << 30  # far beyond any predictions or latencies file


def load_npy(path: Path | str, max_bytes: int = MAX_ARRAY_BYTES) -> np.ndarray:
    """The array in ``path``; ValueError (with the reason) for anything unsafe or corrupt."""
    path = Path(path)
    size = os.stat(path).st_size
    with open(path, "rb") as fh:
        try:
            version = npy_format.read_magic(fh)
            reader = {(1, 0): npy_format.read_array_header_1_0,
                      (2, 0): npy_format.read_array_header_2_0}.get(version)
            if reader is None:
                raise ValueError(f"unsupported .npy version {version}")
            shape, fortran, dtype = reader(fh, max_header_size=MAX_HEADER_BYTES)
        except (ValueError, SyntaxError, TypeError, EOFError, OverflowError) as exc:
            raise ValueError(f"not a readable .npy file ({str(exc)[:120]})") from None
        if dtype.hasobject or dtype.kind not in "biuf":
            raise ValueError(f"dtype {dtype} is not a plain numeric type")
        if any(not isinstance(n, int) or n < 0 for n in shape):
            raise ValueError(f"bad shape {shape!r}")
        count = math.prod(shape)
        nbytes = count * dtype.itemsize
        if nbytes > max_bytes:
            raise ValueError(f"its header claims {nbytes} bytes of data, over the {max_bytes}-byte limit")
        if nbytes != size - fh.tell():
            raise ValueError(f"its header claims {nbytes} bytes of data but the file holds {size - fh.tell()}")
        data = np.fromfile(fh, dtype=dtype, count=count)
    return data.reshape(shape, order="F" if fortran else "C")
