"""Whether a ``.pyc`` in the image is the compilation of a source beside it (threat-model class 4).

A build step can write any bytes under a ``__pycache__/`` folder: a zip of weights named
``numpy/__pycache__/_x.cpython-311.pyc`` is still a zip, and the entry's code may read it as
data. So no folder is exempt from the image inspection, and a ``.pyc`` is accounted for only
when it is what Python writes for a source file in the image:

* its path is ``<dir>/__pycache__/<name>.<tag>[.opt-N].pyc`` and ``<dir>/<name>.py`` is a
  regular file of the image;
* its header (PEP 552) is one Python writes: a magic number ending in ``\\r\\n``, flags 0
  (then the source's mtime and size, which must be the source's) or 1/3 (then the source's
  SipHash, which must be the source's when the image's Python is the host's; for another
  Python the host cannot compute its key, and the size bound below is what is left);
* it is no larger than a compilation can be: ``MAX_RATIO`` times its source plus
  ``SLACK_BYTES``. Of the 11,084 ``.pyc`` files pip compiled in this project's venv (numpy,
  torch, scipy, sympy, pandas...), the largest ratio is 6.3 (sympy's
  ``polys/tests/test_solvers``, constant tuples unfolded), and 2 are over 4 times their
  source plus 4 KiB.

A ``.pyc`` that fails any of these is listed as unexplained and judged like any other file:
its first bytes after the header, the content search for the evaluation set, and the
information budget. What remains: a ``.pyc`` that passes may carry up to the bound's room
past its real code (the runner does not unmarshal untrusted bytes on the host, nor compile
every source of every wheel, which would cost about a minute a build).
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass

MAX_RATIO = 8
SLACK_BYTES = 4096
HEADER_BYTES = 16
_PYC = re.compile(r"^(?P<dir>(?:.*/)?)__pycache__/(?P<name>[^/]+?)\.[a-z]+-\d+(?:\.opt-\d)?\.pyc$")


@dataclass(frozen=True)
class PycHeader:
    magic: bytes
    flags: int
    mtime: int | None  # the source's, for a timestamp .pyc (flags 0)
    source_size: int | None  # the source's size modulo 2**32, likewise
    source_hash: bytes | None  # the source's SipHash, for a hash-based .pyc (flags 1 or 3)


def source_of(path: str) -> str | None:
    """The source a ``.pyc`` at ``path`` would be compiled from; None when the name is not
    one Python gives a cached compilation."""
    match = _PYC.match(path)
    return f"{match['dir']}{match['name']}.py" if match else None


def read_header(head: bytes) -> PycHeader | None:
    """The PEP 552 header of a ``.pyc`` from its first bytes; None when it is not one."""
    if len(head) < HEADER_BYTES or head[2:4] != b"\r\n":
        return None
    flags = int.from_bytes(head[4:8], "little")
    if flags == 0:
        return PycHeader(head[:4], 0, int.from_bytes(head[8:12], "little"), int.from_bytes(head[12:16], "little"), None)
    if flags in (1, 3):
        return PycHeader(head[:4], flags, None, None, head[8:16])
    return None


def source_hash(source: bytes) -> bytes:
    """The SipHash the host's Python writes in a hash-based ``.pyc`` of ``source``."""
    return importlib.util.source_hash(source)


def plausible_size(pyc_size: int, source_size: int) -> bool:
    return pyc_size <= MAX_RATIO * source_size + SLACK_BYTES


def mismatch(header: PycHeader | None, pyc_size: int, source_size: int | None, source_mtime: int | None,
             hashed: bytes | None) -> str | None:
    """Why a ``.pyc`` is not its source's compilation; None when it is. ``source_size`` is
    None when there is no source; ``hashed``: the source's ``source_hash`` when known."""
    if header is None:
        return "not a .pyc header"
    if source_size is None:
        return "no source beside it"
    if not plausible_size(pyc_size, source_size):
        return f"larger than a compilation of its {source_size}-byte source"
    if header.flags == 0:
        if header.source_size != source_size % (1 << 32):
            return "its header names another source size"
        if source_mtime is not None and header.mtime != source_mtime % (1 << 32):
            return "its header names another source time"
        return None
    if header.magic == importlib.util.MAGIC_NUMBER and hashed is not None and header.source_hash != hashed:
        return "its header names another source hash"
    return None
