"""A deterministic ``.tar.gz`` of a bundle: the same folder always packs to the same bytes.

Entries are sorted, owners and times fixed (``SOURCE_DATE_EPOCH`` or 0), modes normalised,
the format is GNU tar (no pax headers carrying times), and the gzip header has mtime 0 and
no file name. The signature covers the file digests, so the packing is only transport;
being byte-stable lets two people compare archives by hash all the same.
"""

from __future__ import annotations

import gzip
import os
import tarfile
from pathlib import Path

from runner import safe_read
from runner.bundle.filelist import MANIFEST, list_files
from runner.errors import UserError


def source_date_epoch() -> int:
    try:
        return max(0, int(os.environ.get("SOURCE_DATE_EPOCH", "0")))
    except ValueError:
        raise UserError(
            f"SOURCE_DATE_EPOCH={os.environ['SOURCE_DATE_EPOCH']!r} is not an integer",
            "set it to seconds since 1970 or unset it",
        ) from None


def pack_folder(root: Path, out_path: Path, prefix: str | None = None) -> Path:
    """Write every file under ``root`` to ``out_path`` under the top folder ``prefix``."""
    root = Path(root)
    if not (root / MANIFEST).is_file():
        raise UserError(f"{root} is not a bundle (no {MANIFEST})", "make the bundle first (runner reproduce does)")
    prefix = prefix or root.name
    mtime = source_date_epoch()
    files = list_files(root, include_bookkeeping=True)
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(out_path.name + ".partial")
    with open(tmp, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as gz:
            with tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as tar:
                for rel in files:
                    path = root / rel
                    info = tarfile.TarInfo(f"{prefix}/{rel}")
                    info.size = path.stat().st_size
                    info.mtime = mtime
                    info.mode = 0o644
                    info.uid = info.gid = 0
                    info.uname = info.gname = ""
                    info.type = tarfile.REGTYPE
                    fh, info.size = safe_read.open_file(path, "data")  # a file swapped for a FIFO: refused
                    with fh:
                        tar.addfile(info, fh)
    os.replace(tmp, out_path)
    return out_path
