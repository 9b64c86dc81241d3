"""ImageNet (ILSVRC2012) validation set from the official ``ILSVRC2012_img_val.tar`` and
``ILSVRC2012_devkit_t12.tar.gz`` (md5s as torchvision lists them; 50,000 images).

Images are decoded one at a time and written straight into a memory-mapped .npy, so the
7.5 GB array never has to fit in memory: RGB, shorter side resized to 256 (bilinear),
centre crop 224, uint8 C x H x W. Labels are class indices 0..999 in sorted-WNID order
(the order torchvision and most pretrained models use), mapped from the devkit's
ILSVRC2012_IDs through its ``meta.mat``. Needs the ``imagenet`` extra (Pillow, SciPy).
"""

from __future__ import annotations

import io
import re
import tarfile
from pathlib import Path

import numpy as np

from runner.errors import UserError
from runner.staging import progress
from runner.staging.checks import Expected, check_count, check_file, file_digest, readable_tar
from runner.staging.stage import Stage

VAL_TAR = "ILSVRC2012_img_val.tar"
DEVKIT = "ILSVRC2012_devkit_t12.tar.gz"
GROUND_TRUTH = "ILSVRC2012_devkit_t12/data/ILSVRC2012_validation_ground_truth.txt"
META = "ILSVRC2012_devkit_t12/data/meta.mat"
OFFICIAL = Expected(
    digests={
        VAL_TAR: ("md5", "29b22e2961454d5413ddabcf34fc5622"),
        DEVKIT: ("md5", "fa75699e90414af021442c21a62c3abf"),
    },
    counts={"eval": 50_000},
)
RESIZE, CROP = 256, 224
FIX = f"download the official {VAL_TAR} and {DEVKIT} again (https://image-net.org)"
EXTRA_FIX = "install the extra: `pip install 'runner[imagenet]'` (Pillow and SciPy)"
_NAME = re.compile(r"(?:.*/)?ILSVRC2012_val_(\d{8})\.JPEG$")


def _pillow():
    try:
        from PIL import Image  # lazy: optional (pillow: the imagenet extra)
    except ImportError:
        raise UserError(
            "importing ImageNet needs Pillow to decode its JPEGs, and Pillow is not installed", EXTRA_FIX
        ) from None
    return Image


def _loadmat():
    try:
        from scipy.io import loadmat  # lazy: heavy (scipy)
    except ImportError:
        raise UserError(
            "importing ImageNet needs SciPy to read the devkit's meta.mat, and SciPy is not installed",
            EXTRA_FIX,
        ) from None
    return loadmat


def preprocess(jpeg: bytes, image_module) -> np.ndarray:
    """Resize the shorter side to 256 and centre-crop 224, as torchvision's
    ``Resize(256)`` + ``CenterCrop(224)`` do; uint8 3 x 224 x 224."""
    with image_module.open(io.BytesIO(jpeg)) as img:
        rgb = img.convert("RGB")  # a few validation images are greyscale or CMYK
    w, h = rgb.size
    if w <= h:
        size = (RESIZE, int(RESIZE * h / w))
    else:
        size = (int(RESIZE * w / h), RESIZE)
    rgb = rgb.resize(size, image_module.Resampling.BILINEAR)
    left = int(round((size[0] - CROP) / 2.0))
    top = int(round((size[1] - CROP) / 2.0))
    rgb = rgb.crop((left, top, left + CROP, top + CROP))
    return np.asarray(rgb, dtype=np.uint8).transpose(2, 0, 1)


def devkit_wnids(path: Path) -> tuple[str, ...]:
    """The 1000 leaf WNIDs (the classes) the devkit's meta.mat lists, sorted."""
    loadmat = _loadmat()
    try:
        with tarfile.open(path, "r:gz") as tar:
            meta_fh = tar.extractfile(META)
            if meta_fh is None:
                raise KeyError(META)
            synsets = loadmat(io.BytesIO(meta_fh.read()), squeeze_me=True)["synsets"]
    except KeyError:
        raise UserError(f"{path} lacks {META}: is it the ILSVRC2012 devkit?", FIX) from None
    except (tarfile.TarError, OSError, EOFError, ValueError) as err:
        raise UserError(f"{path} is not a readable devkit archive ({err})", FIX) from None
    return tuple(sorted(str(s["WNID"]) for s in np.atleast_1d(synsets) if int(s["num_children"]) == 0))


def read_devkit(path: Path) -> np.ndarray:
    """Validation labels (int64, in image-number order) as sorted-WNID class indices."""
    loadmat = _loadmat()
    try:
        with tarfile.open(path, "r:gz") as tar:
            truth_fh, meta_fh = tar.extractfile(GROUND_TRUTH), tar.extractfile(META)
            if truth_fh is None or meta_fh is None:
                raise KeyError(GROUND_TRUTH)
            truth = truth_fh.read().decode("ascii").split()
            synsets = loadmat(io.BytesIO(meta_fh.read()), squeeze_me=True)["synsets"]
    except KeyError:
        raise UserError(
            f"{path} lacks {GROUND_TRUTH} or {META}: is it the ILSVRC2012 devkit?", FIX
        ) from None
    except (tarfile.TarError, OSError, EOFError, ValueError) as err:
        raise UserError(f"{path} is not a readable devkit archive ({err})", FIX) from None
    leaves = [
        (int(s["ILSVRC2012_ID"]), str(s["WNID"]))
        for s in np.atleast_1d(synsets)
        if int(s["num_children"]) == 0
    ]
    class_of_wnid = {wnid: i for i, wnid in enumerate(sorted(w for _, w in leaves))}
    class_of_id = {ilsvrc_id: class_of_wnid[wnid] for ilsvrc_id, wnid in leaves}
    try:
        return np.array([class_of_id[int(t)] for t in truth], dtype=np.int64)
    except (KeyError, ValueError) as err:
        raise UserError(f"{path}: ground truth names an unknown ILSVRC2012_ID ({err})", FIX) from None


def _jpeg_members(tar: tarfile.TarFile, path: Path) -> list[tuple[int, tarfile.TarInfo]]:
    found = []
    with progress.step(f"listing {path.name}"):
        for member in tar.getmembers():
            if not member.isfile():
                continue
            match = _NAME.match(member.name)
            if not match:
                raise UserError(
                    f"{path} holds {member.name}, which is not an ILSVRC2012 validation image", FIX
                )
            found.append((int(match.group(1)), member))
    return sorted(found, key=lambda item: item[0])


def import_files(
    path: Path, target: Path, *, devkit: Path | None = None, expected: Expected = OFFICIAL
) -> None:
    path = Path(path)
    image_module = _pillow()
    _loadmat()  # fail before the long part if SciPy is missing
    if devkit is None:
        raise UserError(
            "importing ImageNet needs the devkit with the validation labels",
            f"pass --devkit PATH/{DEVKIT}",
        )
    devkit = Path(devkit)
    for p in (path, devkit):
        if not p.is_file():
            raise UserError(f"{p} does not exist", f"pass the paths of {VAL_TAR} and {DEVKIT}")
    seen = check_file(path, expected, name=VAL_TAR, fix=FIX)
    check_file(devkit, expected, name=DEVKIT, fix=FIX)
    source_digest = f"md5:{seen}" if seen else f"sha256:{file_digest(path, show=True)}"
    labels = read_devkit(devkit)
    try:
        tar = tarfile.open(path, "r:")
    except (tarfile.TarError, OSError) as err:
        raise UserError(f"{path} is not a readable tar ({err})", FIX) from None
    with tar, readable_tar(path, "tar of validation images", FIX):  # truncated, or a member that lies
        members = _jpeg_members(tar, path)
        check_count("eval", len(members), expected, what=f"ImageNet archive {path.name}", fix=FIX)
        numbers = [n for n, _ in members]
        if numbers != list(range(1, len(members) + 1)) or len(labels) != len(members):
            raise UserError(
                f"{path} does not hold images 1..{len(labels)}, one for each label in {devkit.name}", FIX
            )
        with Stage(
            "imagenet",
            target,
            source=f"file:{path.name}+{devkit.name}",
            source_digest=source_digest,
            conforming=expected.official,
            details={
                "preprocessing": f"RGB, shorter side {RESIZE} bilinear, centre crop {CROP}, uint8 CHW"
            },
        ) as stage:
            images = stage.open_array("eval/images.npy", (len(members), 3, CROP, CROP), "uint8")
            with progress.bar(f"decoding {path.name}", len(members)) as advance:
                for i, (_, member) in enumerate(members):
                    fh = tar.extractfile(member)
                    assert fh is not None
                    try:
                        images[i] = preprocess(fh.read(), image_module)
                    except (OSError, ValueError, SyntaxError) as err:
                        raise UserError(
                            f"{path}: {member.name} is not a decodable JPEG ({err})", FIX
                        ) from None
                    advance()
            images.flush()
            del images
            stage.save_array("labels/eval_labels.npy", labels, "int64")
            stage.counts = {"eval": len(members)}
