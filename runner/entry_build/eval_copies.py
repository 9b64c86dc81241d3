"""The task's evaluation set inside an image, found by content (threat-model class 4).

A whole-file digest finds only an exact copy of the runner's ``images.npy``. The public
test set hides just as well in a package's ``tests/`` folder, split into small files, as
CSV text, gzipped idx files, a list inside a ``.py`` file or a base64 string. So the runner
indexes its own staged copy of the evaluation set and looks for it in every byte:

* **items**: each evaluation item's raw bytes (``C x H x W`` uint8, and ``H x W x C`` for
  colour), found at any offset by its anchors: for each offset modulo 8, the two 8-byte
  windows of the item that the fewest other windows of the set share. Any copy of the item
  puts some of them on 8-aligned offsets, so reading the data as aligned 64-bit words and
  looking each up in a hashed bitmap (then in the sorted keys) finds every copy in one
  linear pass; a candidate is confirmed by comparing the whole item (at least 97 % of the
  pixels that are not zero in either are equal). An item too plain to have a window few
  others share (about 0.5 % of MNIST's) is not indexed;
* **labels**: every 8-gram of the evaluation labels, the same way; a candidate is confirmed
  by the length of the run of consecutive evaluation labels it sits in;
* each file's bytes are read raw; a text file also as the sequence of its numbers
  (``7,0,0,...`` CSV rows of 784 pixels, ``12.0`` as 12, a list in a ``.py`` file) and as
  the sequence of its digits (labels written ``7210414959`` or with any separator), where
  at least a fifth of its characters are digits; a binary file that is neither a program
  nor Python bytecode also as little-endian 16-, 32- and 64-bit integers at every offset;
  ``.npy`` arrays by their values (floats in 0..1 scaled to 0..255); gzip, bzip2, xz, zip
  (wheels, ``.npz``, torch checkpoints), tar members and base64 or hex strings of at least
  ``ENCODED_MIN_CHARS`` (split over lines too) are unpacked and read again.

Files over ``WHOLE_BYTES`` are read in overlapping chunks, raw and as text only; at most
``UNPACK_BYTES`` are unpacked out of one file and ``UNPACK_TOTAL_BYTES`` in all, and a file
that packs more than was unpacked (or a large packed file) is named in ``left_packed``: the
audit could not read all of it, which the image inspection reports as a finding. What is
not found: items or labels transformed before they were stored (scaled, shifted, encrypted,
floats in text, a compression or encoding not listed), and items too plain to index.

``ITEMS_MIN`` evaluation items, or a run of ``LABEL_RUN_MIN`` evaluation labels in order,
anywhere in the image or in a locked wheel is a class 4 finding, with the files named.
"""

from __future__ import annotations

import base64
import binascii
import bz2
import io
import lzma
import re
import tarfile
import warnings
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

# A finding: this many distinct evaluation items, or this long a run of evaluation labels.
ITEMS_MIN = 10
LABEL_RUN_MIN = 200
LABEL_RUN_NOTED = 32  # shorter runs are not even listed
MATCH_FRACTION = 0.97  # of the pixels not zero in the item or the copy
WHOLE_BYTES = 64 << 20  # files up to this size are read whole (containers, arrays, integers)
CHUNK_BYTES = 16 << 20  # larger ones in chunks of this size: raw bytes and text only
PIECE_BYTES = 1 << 20  # sequences are matched and texts parsed in pieces this large
DENSE_WINDOW = 4096  # text is parsed for numbers where a window this long is 1/5 digits
OVERLAP_BYTES = 64 << 10  # kept between chunks, so an item across a boundary is whole in one
UNPACK_BYTES = 256 << 20  # at most this much unpacked out of one file, all levels together
UNPACK_TOTAL_BYTES = 4 << 30  # and out of all the files one index reads
MAX_DEPTH = 4
ENCODED_MIN_CHARS = 256  # base64 or hex strings this long are decoded and read again
INDEX_MAX_BYTES = 512 << 20  # evaluation sets larger than this are not indexed (ImageNet)
_BITS = 25
_MULT = np.uint64(0x9E3779B97F4A7C15)
_SHIFT = np.uint64(64 - _BITS)
_SHARED_MAX = 8  # keys shared by more windows of the set are dropped


@dataclass
class Copy:
    """Evaluation items or labels found in one file (of the image, or a wheel's member)."""

    path: str
    items: int  # distinct evaluation items
    label_run: int  # the longest run of evaluation labels in order
    how: list[str] = field(default_factory=list)
    ids: list[int] = field(default_factory=list, repr=False)  # which items (indices)

    def describe(self) -> str:
        parts = []
        if self.items:
            parts.append(f"{self.items} evaluation items")
        if self.label_run >= LABEL_RUN_NOTED:
            parts.append(f"a run of {self.label_run} evaluation labels")
        return f"{self.path} ({' and '.join(parts)}, as {', '.join(self.how[:3])})"


class _Hits:
    def __init__(self) -> None:
        self.items: set[int] = set()
        self.label_run = 0
        self.how: set[str] = set()

    def add(self, items: set[int], run: int, how: str) -> None:
        if items or run:
            self.items |= items
            self.label_run = max(self.label_run, run)
            self.how.add(how)

    def copy(self, path: str) -> Copy | None:
        if not self.items and self.label_run < LABEL_RUN_NOTED:
            return None  # a few labels in a row match by chance everywhere
        return Copy(path, len(self.items), self.label_run, sorted(self.how), sorted(self.items))


class _Budget:
    """What may still be unpacked out of one file; ``short`` once something was left packed."""

    def __init__(self, left: int):
        self.left = left
        self.short = False

    def take(self, size: int) -> bool:
        if size > self.left:
            self.short = True
            return False
        self.left -= size
        return True


def _hash(words: np.ndarray) -> np.ndarray:
    """A _BITS-bit hash of each 64-bit word, as int64 (numpy indexes fastest with those)."""
    hashed = words * _MULT
    hashed >>= _SHIFT
    return hashed.view(np.int64)


def _distinct_at_least(windows: np.ndarray, k: int) -> np.ndarray:
    """Rows of ``windows`` (..., 8) uint8 with at least ``k`` distinct values."""
    ordered = np.sort(windows, axis=-1)
    return (np.diff(ordered, axis=-1) != 0).sum(axis=-1) + 1 >= k


class EvalIndex:
    """Signatures of one evaluation set: item anchors and label 8-grams."""

    def __init__(self, images: np.ndarray | None, labels: np.ndarray | None):
        keys, owners, offsets = [], [], []
        self.layouts: list[np.ndarray] = []
        if images is not None and images.ndim >= 2 and images.dtype == np.uint8 and len(images):
            self.layouts.append(np.ascontiguousarray(images.reshape(len(images), -1)))
            if images.ndim == 4 and images.shape[1] > 1:  # colour: H x W x C too
                self.layouts.append(np.ascontiguousarray(images.transpose(0, 2, 3, 1).reshape(len(images), -1)))
        self.count = len(images) if images is not None and self.layouts else 0
        self.item_bytes = self.layouts[0].shape[1] if self.layouts else 0
        for layout, table in enumerate(self.layouts):
            if self.item_bytes < 32:
                break
            k, o, f = self._anchors(table, layout)
            keys.append(k)
            owners.append(o)
            offsets.append(f)
        self.labels: np.ndarray | None = None
        if labels is not None and len(labels) >= 8 and labels.min() >= 0 and labels.max() < 256:
            self.labels = np.ascontiguousarray(labels.astype(np.uint8))
            win = np.lib.stride_tricks.sliding_window_view(self.labels, 8)
            steps = np.mod(np.diff(win.astype(np.int16), axis=1), int(self.labels.max()) + 1)
            progression = (steps == steps[:, :1]).all(axis=1)  # 3,4,5,...,9,0: any counting text
            good = _distinct_at_least(win, 3) & ~progression
            keys.append(np.ascontiguousarray(win[good]).view("<u8").ravel())
            owners.append(np.full(int(good.sum()), -1, np.int64))
            offsets.append(np.flatnonzero(good).astype(np.int64))
        if keys:
            all_keys = np.concatenate(keys)
            order = np.argsort(all_keys, kind="stable")
            self.keys = all_keys[order]
            self.owner = np.concatenate(owners)[order]
            self.offset = np.concatenate(offsets)[order]
            # A window that many items share tells little and costs comparisons.
            _, counts = np.unique(self.keys, return_counts=True)
            keep = np.repeat(counts <= _SHARED_MAX, counts)
            self.keys, self.owner, self.offset = self.keys[keep], self.owner[keep], self.offset[keep]
        else:
            self.keys = np.zeros(0, np.uint64)
            self.owner = self.offset = np.zeros(0, np.int64)
        # A piece of a sequence overlaps the next by this much: an item or a label run of
        # LABEL_RUN_MIN across the boundary is whole in one of them.
        self.overlap = (max(self.item_bytes, 2 * LABEL_RUN_MIN) + 15) // 8 * 8
        self.shortest = min(self.item_bytes or LABEL_RUN_NOTED, LABEL_RUN_NOTED if self.labels is not None else 1 << 62)
        self.unpack_left = UNPACK_TOTAL_BYTES
        self.left_packed: list[str] = []  # files with more packed in them than was unpacked
        # One bit per hash value, packed: 4 MiB, so the look-ups mostly stay in the cache.
        self.bitmap = np.zeros(1 << (_BITS - 3), np.uint8)
        hashed = _hash(self.keys)
        np.bitwise_or.at(self.bitmap, hashed >> 3, (1 << (hashed & 7)).astype(np.uint8))

    @staticmethod
    def _anchors(table: np.ndarray, layout: int):
        """Per item, for each offset modulo 8, the two 8-byte windows of the item that the
        fewest windows of the set share (constant words never): wherever a copy starts,
        some of them fall on 8-aligned offsets."""
        n, size = table.shape
        columns = (size - 7) // 8 * 8
        words = np.zeros((n, columns), np.uint64)
        for k in range(8):
            words |= table[:, k:k + columns].astype(np.uint64) << np.uint64(8 * k)
        # How many windows of the set share each window (by a 24-bit hash: never under-counted)
        hashed = (words * _MULT) >> np.uint64(40)
        shared = np.bincount(hashed.ravel(), minlength=1 << 24)[hashed]
        del hashed
        varied = np.zeros((n, columns), bool)
        for k in range(1, 8):
            varied |= table[:, k:k + columns] != table[:, :columns]
        shared[~varied] = np.iinfo(np.int64).max  # all eight bytes alike (zeros)
        order = np.argsort(shared.reshape(n, -1, 8), axis=1, kind="stable")[:, :2, :]  # (n, 2, 8)
        start = order * 8 + np.arange(8)  # window offsets in the item
        rows = np.arange(n)[:, None, None]
        good = varied[rows, start] & (shared[rows, start] <= _SHARED_MAX)
        keys = words[rows, start][good]
        owners = np.broadcast_to(rows * 4 + layout, good.shape)[good]
        return keys, owners.astype(np.int64), start[good].astype(np.int64)

    @classmethod
    def from_files(cls, images: Path | None, labels: Path | None) -> "EvalIndex | None":
        """The index of a staged evaluation set; None when there is nothing to index."""
        x = y = None
        if images is not None and images.is_file() and images.stat().st_size <= INDEX_MAX_BYTES:
            x = np.load(images, allow_pickle=False, mmap_mode="r")
        if labels is not None and labels.is_file():
            y = np.load(labels, allow_pickle=False)
            if y.dtype.kind not in "iu" or y.ndim != 1:
                y = None
        if x is None and y is None:
            return None
        index = cls(None if x is None else np.asarray(x), y)
        return index if len(index.keys) else None

    # -- matching one sequence of bytes ----------------------------------------------------------

    def match(self, seq: np.ndarray) -> tuple[set[int], int]:
        """(evaluation items, longest label run) found in ``seq`` (uint8, any offsets), in
        overlapping pieces (small temporaries are much faster than large ones)."""
        if len(seq) <= PIECE_BYTES + self.overlap:
            return self._match(seq)
        items, run = set(), 0
        for start in range(0, len(seq) - self.overlap, PIECE_BYTES):
            found, longest = self._match(seq[start:start + PIECE_BYTES + self.overlap])
            items |= found
            run = max(run, longest)
        return items, run

    def _match(self, seq: np.ndarray) -> tuple[set[int], int]:
        n = len(seq) // 8 * 8
        if n < self.shortest or not len(self.keys):
            return set(), 0  # too short to hold an item or a run worth noting
        words = np.ascontiguousarray(seq[:n]).view("<u8")
        hashed = _hash(words)
        bits = self.bitmap[hashed >> 3]
        bits >>= (hashed & 7).astype(np.uint8)
        candidates = np.flatnonzero(bits & 1)
        if not len(candidates):
            return set(), 0
        found = words[candidates]
        lo = np.searchsorted(self.keys, found, "left")
        hi = np.searchsorted(self.keys, found, "right")
        exact = hi > lo
        if not exact.any():
            return set(), 0
        # every (position, key) pair of the exact hits
        lo, hi, position = lo[exact], hi[exact], candidates[exact] * 8
        counts = hi - lo
        at = np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))
        position = np.repeat(position, counts)
        owner, offset = self.owner[at], self.offset[at]
        start = position - offset
        image = owner >= 0
        items = self._items(seq, start[image], owner[image]) if image.any() else set()
        labels = dict(zip(start[~image].tolist(), offset[~image].tolist()))
        return items, max((self._label_run(seq, s, j) for s, j in labels.items()), default=0)

    def _items(self, seq: np.ndarray, start: np.ndarray, owner: np.ndarray) -> set[int]:
        """The items confirmed among (start, owner) candidates: the whole item compared."""
        size = self.item_bytes
        inside = (start >= 0) & (start + size <= len(seq))
        if not inside.any():
            return set()
        pairs = np.unique(start[inside] << 24 | owner[inside])  # owner < 4 * 2**22 items
        found: set[int] = set()
        span = np.arange(size)
        for batch in range(0, len(pairs), 1024):
            part = pairs[batch:batch + 1024]
            copy = seq[(part >> 24)[:, None] + span]
            item, layout = np.divmod(part & 0xFFFFFF, 4)
            reference = np.empty_like(copy)
            for k, table in enumerate(self.layouts):
                reference[layout == k] = table[item[layout == k]]
            shown = (copy != 0) | (reference != 0)
            equal = ((copy == reference) & shown).sum(axis=1)
            total = shown.sum(axis=1)
            found.update(item[(total > 0) & (equal >= MATCH_FRACTION * total)].tolist())
        return found

    def _label_run(self, seq: np.ndarray, start: int, at: int) -> int:
        """The run of consecutive labels equal to the evaluation labels, around label ``at``
        (the sequence's label 0 sits at ``start``)."""
        labels = self.labels
        if labels is None:  # never: a label key is indexed only with the labels
            return 0
        lo, hi = max(0, -start), min(len(labels), len(seq) - start)
        if hi - lo < 8:
            return 0
        equal = seq[start + lo:start + hi] == labels[lo:hi]
        where = at - lo
        before = np.flatnonzero(~equal[:where])
        after = np.flatnonzero(~equal[where:])
        left = before[-1] + 1 if len(before) else 0
        right = where + after[0] if len(after) else len(equal)
        run = labels[lo + left:lo + right].astype(np.int16)
        if len(run) >= LABEL_RUN_MIN:  # a stretch of 0,1,2,...,9,0,1 matches any counting text
            steps = np.diff(run) % (int(labels.max()) + 1)
            if np.count_nonzero(np.diff(steps)) < len(run) // 2:
                return 0
        return int(right - left)

    # -- reading files -------------------------------------------------------------------------

    def scan_bytes(self, path: str, data: bytes) -> Copy | None:
        hits = _Hits()
        budget = _Budget(min(UNPACK_BYTES, self.unpack_left))
        self._scan(data, hits, "", 0, budget)
        self.unpack_left -= min(UNPACK_BYTES, self.unpack_left) - budget.left
        if budget.short:
            self.left_packed.append(path)
        return hits.copy(path)

    def scan_chunks(self, path: str, chunks) -> Copy | None:
        """A file too large to read whole, from an iterator of its chunks: raw and as text."""
        hits = _Hits()
        pending: list[bytes] = []
        size, fresh = 0, False
        for chunk in chunks:
            if not size and not pending and chunk.startswith(_PACKED_MAGIC):
                self.left_packed.append(path)  # too large to unpack: read raw only
            pending.append(chunk)
            size += len(chunk)
            fresh = True
            if size >= CHUNK_BYTES:
                buffer = b"".join(pending)
                self._flat(buffer, hits, "")
                pending, size, fresh = [buffer[-OVERLAP_BYTES:]], OVERLAP_BYTES, False
        if fresh:
            self._flat(b"".join(pending), hits, "")
        return hits.copy(path)

    def scan_wheel(self, wheel: Path) -> list[Copy]:
        """Every member of a wheel (RECORD-listed, tests/ folders, small files alike)."""
        copies = []
        with zipfile.ZipFile(wheel) as archive:
            for info in archive.infolist():
                if info.is_dir():
                    continue
                name = f"{wheel.name}:{info.filename}"
                with archive.open(info) as fh:
                    if info.file_size <= WHOLE_BYTES:
                        found = self.scan_bytes(name, fh.read())
                    else:
                        found = self.scan_chunks(name, iter(lambda: fh.read(1 << 20), b""))
                if found:
                    copies.append(found)
        return copies

    def _flat(self, data: bytes, hits: _Hits, where: str) -> np.ndarray:
        """Raw bytes and, for text, its numbers and digits. Returns the bytes as an array."""
        raw = np.frombuffer(data, np.uint8)
        items, run = self.match(raw)
        hits.add(items, run, where + "raw bytes")
        if _is_text(data):
            for region in _numeric_regions(raw):
                numbers, digits = _numbers(raw[region])
                items, run = self.match(numbers)
                hits.add(items, run, where + "numbers in text")
                hits.add(set(), self.match(digits)[1], where + "digits in text")
        return raw

    def _scan(self, data: bytes, hits: _Hits, where: str, depth: int, budget: _Budget) -> None:
        raw = self._flat(data, hits, where)
        if depth >= MAX_DEPTH:
            probe = _Budget(0)
            budget.short |= any(True for _ in _unpacked(data, probe)) or probe.short
            return
        head = data[:8]
        if head.startswith(b"\x93NUMPY"):
            self._npy(data, hits, where)
        elif not _is_text(data) and not head.startswith(b"\x7fELF") and head[2:4] != b"\r\n":
            # (programs and Python bytecode hold no arrays of integers to read)
            for width in (2, 4, 8):  # little-endian integers of every width and offset
                for phase in range(width):
                    lane = raw[phase::width]
                    if len(lane) < 8 or not lane.any():
                        continue  # the high bytes of small integers
                    items, run = self.match(np.ascontiguousarray(lane))
                    hits.add(items, run, where + f"{8 * width}-bit integers")
        for name, inner in _unpacked(data, budget):
            self._scan(inner, hits, f"{where}{name}: ", depth + 1, budget)

    def _npy(self, data: bytes, hits: _Hits, where: str) -> None:
        array = _npy_array(data)
        if array is None:
            return
        values = _as_bytes(array)
        if values is not None:
            items, run = self.match(values)
            hits.add(items, run, where + "array values")


def _is_text(data: bytes) -> bool:
    return b"\0" not in data[:8192]


def _numeric_regions(raw: np.ndarray) -> list[slice]:
    """Where a text is dense in digits (a fifth of its characters or more, by windows of
    DENSE_WINDOW), in pieces of PIECE_BYTES that overlap: all that is worth parsing for
    numbers (pixels as CSV or a list, labels); code and prose are far sparser."""
    digit = (raw - np.uint8(48)) < 10
    if len(raw) <= DENSE_WINDOW:
        count = int(np.count_nonzero(digit))
        return [slice(0, len(raw))] if count >= 16 and count * 5 >= len(raw) else []
    whole = len(raw) // DENSE_WINDOW * DENSE_WINDOW
    counts = digit[:whole].reshape(-1, DENSE_WINDOW).sum(axis=1)
    counts = np.append(counts, np.count_nonzero(digit[whole:]) * DENSE_WINDOW // max(1, len(raw) - whole))
    dense = counts * 5 >= DENSE_WINDOW
    dense[:-1] |= dense[1:]  # and one window either side, for a list that straddles
    dense[1:] |= dense[:-1].copy()
    regions = []
    edges = np.flatnonzero(np.diff(np.concatenate(([False], dense, [False])).view(np.int8)))
    for first, last in zip(edges[::2] * DENSE_WINDOW, edges[1::2] * DENSE_WINDOW):
        last = min(int(last), len(raw))
        for start in range(int(first), last, PIECE_BYTES):
            regions.append(slice(max(int(first), start - OVERLAP_BYTES), min(last, start + PIECE_BYTES)))
    return regions


def _numbers(part: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The numbers of a text as bytes (0..255; longer numbers as 0; ``12.0`` is 12) and the
    values of its digits."""
    value = part - np.uint8(48)
    digit = value < 10
    value *= digit
    n = len(part)
    d1 = np.zeros(n, bool)  # d1[i]: characters i-1 and i are digits
    d1[1:] = digit[1:] & digit[:-1]
    d2 = np.zeros(n, bool)
    d2[2:] = d1[2:] & digit[:-2]
    d3 = np.zeros(n, bool)
    d3[3:] = d2[3:] & digit[:-3]
    number = value.astype(np.uint16)  # at a number's last digit: its value (up to 3 digits)
    number[1:] += value[:-1] * np.uint16(10) * d1[1:]
    number[2:] += value[:-2] * np.uint16(100) * d2[2:]
    last = digit.copy()
    last[:-1] &= ~digit[1:]
    before = np.full(n, 32, np.uint8)  # the character before each number
    before[1:] = part[:-1]
    before[2:] = np.where(d1[2:], part[:-2], before[2:])
    before[3:] = np.where(d2[3:], part[:-3], before[3:])
    keep = last & ~((before == 46) & (number == 0) & ~d3)  # "12.0": 12, not 12 and 0
    number[d3] = 0
    number = number[keep]
    number[number > 255] = 0
    return number.astype(np.uint8), value[digit]


def _npy_array(data: bytes) -> np.ndarray | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an old (Python 2) header, say: read it anyway
            return _npy_read(data)
    except Exception:  # noqa: BLE001 - a damaged array is simply not read
        return None


def _npy_read(data: bytes) -> np.ndarray | None:
    stream = io.BytesIO(data)
    version = np.lib.format.read_magic(stream)
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran, dtype = read(stream)
    if dtype.hasobject or dtype.kind not in "biuf":
        return None
    count = int(np.prod(shape, dtype=np.int64))
    array = np.frombuffer(data, dtype, count=count, offset=stream.tell())
    return array.reshape(shape, order="F" if fortran else "C")


def _as_bytes(array: np.ndarray) -> np.ndarray | None:
    """The array's values as uint8, when they fit: integers 0..255, floats 0..1 or 0..255."""
    flat = np.ascontiguousarray(array).ravel()
    if not flat.size or flat.dtype.kind == "b":
        return None
    if flat.dtype.kind == "f":
        if not np.isfinite(flat).all():
            return None
        low, high = float(flat.min()), float(flat.max())
        if low < 0 or high > 255:
            return None
        scaled = flat * 255 if high <= 1.0 else flat
        return np.rint(scaled).astype(np.uint8)
    if int(flat.min()) < 0 or int(flat.max()) > 255:
        return None
    return flat.astype(np.uint8)


def _decompress(factory, data: bytes, budget: _Budget) -> bytes | None:
    try:
        stream = factory()
        out = stream.decompress(data, max(budget.left, 1))
    except Exception:  # noqa: BLE001 - not what its first bytes said
        return None
    if len(out) >= budget.left and not stream.eof:
        budget.short = True  # more than may be unpacked: what was is still read
    budget.left = max(0, budget.left - len(out))
    return out


def _unpacked(data: bytes, budget: _Budget):
    """(name, bytes) of whatever ``data`` packs: compressed streams, archive members,
    long base64 or hex strings; at most ``budget.left`` bytes in all (``budget.short`` is
    set when more was packed)."""
    if data[:2] == b"\x1f\x8b":
        out = _decompress(lambda: zlib.decompressobj(47), data, budget)
        if out:
            yield "gzip", out
    elif data[:3] == b"BZh":
        out = _decompress(bz2.BZ2Decompressor, data, budget)
        if out:
            yield "bzip2", out
    elif data[:6] == b"\xfd7zXZ\x00":
        out = _decompress(lzma.LZMADecompressor, data, budget)
        if out:
            yield "xz", out
    elif data[:4] == b"PK\x03\x04" or data[:4] == b"PK\x05\x06":
        try:
            archive = zipfile.ZipFile(io.BytesIO(data))
            members = [m for m in archive.infolist() if not m.is_dir()]
        except Exception:  # noqa: BLE001
            members = []
        for member in members:
            if not budget.take(member.file_size):
                return
            try:
                out = archive.read(member)
            except Exception:  # noqa: BLE001
                continue
            yield member.filename, out
    elif len(data) > 262 and data[257:262] == b"ustar":
        try:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
                for tar_member in tar:
                    if tar_member.isreg() and (fh := tar.extractfile(tar_member)) is not None:
                        if not budget.take(tar_member.size):
                            return
                        yield tar_member.name, fh.read()
        except Exception:  # noqa: BLE001
            return
    if _is_text(data):
        yield from _encoded_strings(data, budget)


_PACKED_MAGIC = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00", b"PK\x03\x04", b"PK\x05\x06")
_ENCODED_CLASS = bytes(65 if chr(c).isascii() and (chr(c).isalnum() or chr(c) in "+/") else 32 for c in range(256))
_B64 = np.zeros(256, bool)
_B64[np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_", np.uint8)] = True
_WORD = re.compile(rb"[A-Za-z0-9+/=_-]+")
_GLUE = np.zeros(256, bool)
_GLUE[np.frombuffer(b" \t\r\n\"'\\,+()", np.uint8)] = True


def _encoded_strings(data: bytes, budget: _Budget):
    """Long base64 or hex strings, split over quoted lines or concatenations too, decoded:
    consecutive words of at least 16 characters (and the shorter one that may end them)."""
    if b"A" * 40 not in data.translate(_ENCODED_CLASS):  # no line of base64 or hex at all
        return
    raw = np.frombuffer(data, np.uint8)
    inside = _B64[raw] | _GLUE[raw]
    edges = np.flatnonzero(np.diff(np.concatenate(([False], inside, [False])).view(np.int8)))
    for start, end in zip(edges[::2], edges[1::2]):
        if end - start < ENCODED_MIN_CHARS:
            continue
        stretch: list[bytes] = []
        for word in [*_WORD.findall(data, start, end), b""]:
            if len(word) >= 16:
                stretch.append(word)
                continue
            if stretch:
                text = b"".join(stretch + [word])
                stretch = []
                if len(text) >= ENCODED_MIN_CHARS and _random_letters(text):
                    decoded = _decode(text)
                    if decoded is not None and budget.take(len(decoded[1])):
                        yield f"{decoded[0]} at byte {start}", decoded[1]


def _decode(text: bytes) -> tuple[str, bytes] | None:
    try:
        if len(text) % 2 == 0 and not text.strip(b"0123456789abcdefABCDEF"):
            return "hex", binascii.unhexlify(text)
        text = text.replace(b"-", b"+").replace(b"_", b"/").rstrip(b"=")
        return "base64", base64.b64decode(text + b"=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None


def _random_letters(text: bytes) -> bool:
    """Letters and digits mixed as in random base64 or hex (a sample of the start)."""
    sample = np.frombuffer(text[:4096], np.uint8)
    letters = np.count_nonzero(((sample >= 65) & (sample <= 90)) | ((sample >= 97) & (sample <= 122)))
    digits = np.count_nonzero((sample >= 48) & (sample <= 57))
    return bool(letters >= 0.25 * len(sample) and digits >= 0.05 * len(sample))

