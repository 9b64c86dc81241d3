"""Import and per-run check of a training tree of JPEGs (ImageNet's layout), against what a
user would do by hand to trust the same files.

ImageNet's training set stays a tree of 1.28 M JPEGs (``runner.tasks.imagenet.train_tree``):
imported once (every file hashed into a manifest), then checked before each run by a stat
of every file and the sha256 of a seeded sample. This benchmark makes a synthetic
``ILSVRC2012_img_train.tar`` of the official shape (a tar of per-class tars of JPEGs in
WNID folders; small random images, so it measures per-file costs, not bytes) and times:

* the import of the tar (one streaming pass: extract, hash, md5 of the outer tar), and of
  the unpacked folder kept in place;
* each run's check (stat every file, re-hash ``SAMPLE`` of them) and the full check;
* beside them, what a user would do instead: ``tar -xf`` of the outer and every inner tar,
  then ``sha256sum`` over every file;
* a changed file, same size and mtime restored: the full check names it.

Everything lives in a temporary folder; the user's staged data is never touched.
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from runner.errors import UserError
from runner.staging.checks import Expected


def make_train_tar(path: Path, images: int, classes: int, side: int) -> int:
    """Write a tar of ``classes`` per-class tars (``n0000000k.tar``) holding ``images`` JPEGs
    in all; return the bytes written."""
    from PIL import Image  # lazy: optional (pillow: the imagenet extra)

    rng = np.random.default_rng(0)
    per_class = [images // classes + (1 if k < images % classes else 0) for k in range(classes)]
    with tarfile.open(path, "w") as outer:
        for k, count in enumerate(per_class):
            wnid = f"n{k:08d}"
            inner = io.BytesIO()
            with tarfile.open(fileobj=inner, mode="w") as tar:
                for i in range(count):
                    buf = io.BytesIO()
                    Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8)).save(buf, "JPEG", quality=90)
                    _add(tar, f"{wnid}_{i}.JPEG", buf.getvalue())
            _add(outer, f"{wnid}.tar", inner.getvalue())
    return path.stat().st_size


def _add(tar: tarfile.TarFile, name: str, payload: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(payload), 1_300_000_000, 0o644
    tar.addfile(info, io.BytesIO(payload))


def _by_hand(tar_path: Path, target: Path) -> float:
    """``tar -xf`` the outer tar and each class tar into its folder, then ``sha256sum`` every file."""
    started = time.monotonic()
    target.mkdir()
    subprocess.run(["tar", "-xf", str(tar_path), "-C", str(target)], check=True)
    for inner in sorted(target.glob("*.tar")):
        folder = target / inner.stem
        folder.mkdir()
        subprocess.run(["tar", "-xf", str(inner), "-C", str(folder)], check=True)
        inner.unlink()
    listing = subprocess.run(["find", str(target), "-type", "f", "-print0"], check=True, capture_output=True).stdout
    subprocess.run(["xargs", "-0", "sha256sum"], input=listing, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - started


def _timed(fn):
    started = time.monotonic()
    value = fn()
    return value, time.monotonic() - started


def run(args) -> int:
    from runner.tasks.imagenet import train_tree  # lazy: start-up (runner --help)

    console = Console()
    if args.images < args.classes or args.classes < 1:
        console.print("[red]error:[/] --images must be at least --classes, and --classes at least 1")
        return 2
    with tempfile.TemporaryDirectory(prefix="runner-bench-tree-") as tmp_name:
        tmp = Path(tmp_name)
        tar_path = tmp / train_tree.TRAIN_TAR
        with console.status(f"writing a training tar of {args.images:,} JPEGs in {args.classes} classes"):
            size, make_s = _timed(lambda: make_train_tar(tar_path, args.images, args.classes, args.size))
        md5 = hashlib.md5(tar_path.read_bytes()).hexdigest()
        expected = Expected(digests={train_tree.TRAIN_TAR: ("md5", md5)},
                            counts={"train": args.images, "classes": args.classes}, official=False)
        with console.status("import of the tar (extract, hash every file, md5 of the tar)"):
            tree, import_s = _timed(lambda: train_tree.import_tree(tar_path, tmp / "home-tar", expected=expected))
        run_checks = [train_tree.check_tree(tree, seed=seed).seconds for seed in range(3)]
        with console.status("full check (re-hash every file)"):
            _, full_s = _timed(lambda: train_tree.check_tree(tree, full=True))
        with console.status("import of the unpacked folder, kept in place"):
            _, folder_s = _timed(lambda: train_tree.import_tree(tree.root, tmp / "home-folder", expected=expected))
        with console.status("by hand: tar -xf every tar, sha256sum every file"):
            hand_s = _by_hand(tar_path, tmp / "by-hand")
        # A file changed in place, its size and mtime kept: the stat pass cannot see it,
        # a sample finds it only if drawn, the full check names it.
        victim = sorted((tree.root / "n00000000").iterdir())[0]
        stat = victim.stat()
        data = bytearray(victim.read_bytes())
        data[-3] ^= 0xFF
        victim.write_bytes(bytes(data))
        os.utime(victim, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        try:
            train_tree.check_tree(tree, full=True)
            found = "[red]NOT detected[/]"
        except UserError as err:
            found = f"detected: {err.problem.split(': ', 1)[-1]}" if victim.name in err.problem else f"[red]{err.problem}[/]"

    table = Table(title=f"training tree: {args.images:,} JPEGs of {args.size}x{args.size} px, {args.classes} classes, "
                        f"{size / 1e6:.1f} MB tar")
    for column in ("measure", "seconds", "per 1,000 files", "note"):
        number = column in ("seconds", "per 1,000 files")
        table.add_column(column, no_wrap=number, justify="right" if number else "left")

    def row(name: str, seconds: float, note: str = "") -> None:
        table.add_row(name, f"{seconds:.2f}", f"{seconds / args.images * 1000:.3f}", note)

    row("write the synthetic tar", make_s, "not the runner's: the input")
    row("import the tar", import_s, "one streaming pass; manifest of sha256 per file")
    row("import the unpacked folder", folder_s, "kept in place; every file hashed")
    row("per-run check (median of 3)", sorted(run_checks)[1],
        f"stat every file, sha256 of {min(train_tree.SAMPLE, args.images)} drawn by seed; "
        f"runs {', '.join(f'{s:.2f}' for s in run_checks)}")
    row("full check", full_s, "sha256 of every file (runner data check --full)")
    row("by hand: tar -xf all, sha256sum all", hand_s, "what a user would do instead to trust the files")
    table.add_row("a file changed in place", "", "", found)
    console.print(table)
    return 0
