"""ImageNetV2 matched-frequency (Recht et al., "Do ImageNet Classifiers Generalize to
ImageNet?", 2019; https://github.com/modestyachts/ImageNetV2): 10,000 new test images, ten
per class, collected from Flickr by ImageNet's protocol, the second test set ``runner study
generalization`` scores ImageNet models on.

The official file, ``imagenetv2-matched-frequency.tar.gz``, holds the folder
``imagenetv2-matched-frequency-format-val/`` with one sub-folder per class named by its
index 0..999 (the sorted-WNID order the runner's ImageNet labels use) holding that class's
JPEGs. Its SHA-256 is pinned (the task's ``ExtraSet``) as TensorFlow Datasets lists it
(``tensorflow_datasets/datasets/imagenet_v2/checksums.tsv``, 1,264,079,360 bytes). The
images are preprocessed exactly as the ImageNet evaluation set (``source.preprocess``:
shorter side 256, centre crop 224, uint8 C x H x W), in (class, file name) order.
"""

from __future__ import annotations

import io
import re
import tarfile
from pathlib import Path

import numpy as np

from runner.staging import progress
from runner.staging.checks import Expected, check_count, readable_tar
from runner.staging.extra import check_digests, how_to_import, source_digest, stage_details
from runner.staging.stage import Stage
from runner.errors import UserError
from runner.tasks.imagenet.source import CROP, RESIZE, _pillow, preprocess

ARCHIVE = "imagenetv2-matched-frequency.tar.gz"  # the name and pinned digest: the task's ExtraSet
TOP = "imagenetv2-matched-frequency-format-val"
_MEMBER = re.compile(r"(?:[^/]+/)?(\d{1,4})/([^/]+\.jpe?g)$", re.IGNORECASE)


def _members(tar: tarfile.TarFile, path: Path, classes: int, item) -> list[tuple[int, str, tarfile.TarInfo]]:
    found = []
    with progress.step(f"listing {path.name}"):
        for member in tar.getmembers():
            if member.isdir():
                continue
            match = _MEMBER.fullmatch(member.name.lstrip("./"))
            if not member.isfile() or not match or int(match.group(1)) >= classes:
                raise UserError(f"{path} holds {member.name!r}, which is not an ImageNetV2 image "
                                f"({TOP}/<class 0..{classes - 1}>/<name>.jpeg)", how_to_import(item))
            found.append((int(match.group(1)), match.group(2), member))
    return sorted(found, key=lambda f: (f[0], f[1]))


def import_files(files: dict[str, Path], target: Path, *, expected: Expected, task, item) -> None:
    image_module = _pillow()
    path = files[ARCHIVE]
    digests = check_digests(files, expected, item)
    try:
        tar = tarfile.open(path, "r:*")  # gzipped as published; a plain tar of the same tree is read too
    except (tarfile.TarError, OSError, EOFError) as err:
        raise UserError(f"{path} is not a readable tar archive ({err})", how_to_import(item)) from None
    with tar, readable_tar(path, "tar of ImageNetV2 images", how_to_import(item)):
        members = _members(tar, path, task.num_classes, item)
        if not members:
            raise UserError(f"{path} holds no images", how_to_import(item))
        check_count("eval", len(members), expected, what=f"ImageNetV2 archive {path.name}", fix=how_to_import(item))
        with Stage(item.name, target, source=f"file:{path.name}", source_digest=source_digest(digests),
                   conforming=expected.official,
                   details=stage_details(item, digests, expected,
                                         preprocessing=f"RGB, shorter side {RESIZE} bilinear, centre crop {CROP}, "
                                                       "uint8 CHW")) as stage:
            images = stage.open_array("eval/images.npy", (len(members), 3, CROP, CROP), "uint8")
            with progress.bar(f"decoding {path.name}", len(members)) as advance:
                for i, (_, _, member) in enumerate(members):
                    fh = tar.extractfile(member)
                    if fh is None:
                        raise UserError(f"{path}: {member.name} is not a regular file", how_to_import(item))
                    try:
                        images[i] = preprocess(fh.read(), image_module)
                    except (OSError, ValueError, SyntaxError) as err:
                        raise UserError(f"{path}: {member.name} is not a decodable JPEG ({err})",
                                        how_to_import(item)) from None
                    advance()
            images.flush()
            del images
            stage.save_array("labels/eval_labels.npy", np.array([c for c, _, _ in members]), "int64")
            stage.counts = {"eval": len(members)}


def write_standin(folder: Path, images: np.ndarray, labels: np.ndarray) -> None:
    """The official archive's layout for ``images`` (N x 3 x H x W uint8) and ``labels``:
    ``TOP/<class>/<n>.jpeg`` in a gzipped tar."""
    image_module = _pillow()
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(folder / ARCHIVE, "w:gz") as tar:
        for i, (image, label) in enumerate(zip(np.asarray(images, np.uint8), labels)):
            buffer = io.BytesIO()
            image_module.fromarray(image.transpose(1, 2, 0)).save(buffer, "JPEG", quality=95)
            info = tarfile.TarInfo(f"{TOP}/{int(label)}/{i}.jpeg")
            info.size = buffer.tell()
            buffer.seek(0)
            tar.addfile(info, buffer)
