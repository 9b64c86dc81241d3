"""Small synthetic files in the official formats of CIFAR-10, SQuAD v1.1 and ImageNet,
for testing the import paths (the real files cannot be fetched here)."""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import tarfile
from pathlib import Path

import numpy as np


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def _add(tar: tarfile.TarFile, name: str, payload: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(payload)
    tar.addfile(info, io.BytesIO(payload))


def cifar_batch_pickle(images: np.ndarray, labels: list[int]) -> bytes:
    """A batch as the official archive has it: a protocol-2 pickle of a dict with byte
    keys, whose array is rebuilt by ``numpy.core.multiarray._reconstruct``."""
    batch = {
        b"batch_label": b"synthetic",
        b"labels": labels,
        b"data": images.reshape(len(images), -1),
        b"filenames": [b"img%d.png" % i for i in range(len(images))],
    }
    raw = pickle.dumps(batch, protocol=2)
    return raw.replace(b"numpy._core.multiarray", b"numpy.core.multiarray")


def make_cifar_archive(path: Path, per_batch: int = 4, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    arrays = {}
    with tarfile.open(path, "w:gz") as tar:
        for name in names:
            images = rng.integers(0, 256, (per_batch, 3, 32, 32), dtype=np.uint8)
            labels = rng.integers(0, 10, per_batch)
            arrays[name] = (images, labels)
            _add(tar, f"cifar-10-batches-py/{name}", cifar_batch_pickle(images, labels.tolist()))
        _add(
            tar,
            "cifar-10-batches-py/batches.meta",
            pickle.dumps({b"label_names": [b"x"] * 10}, protocol=2),
        )
    return arrays


def make_squad_file(
    path: Path, n_articles: int = 2, per_paragraph: int = 3, version: str = "1.1"
) -> dict[str, list[str]]:
    answers = {}
    data = []
    for a in range(n_articles):
        context = f"Article {a} says the river Kaya{a} flows into the Lake Mira{a} near Tolmet."
        qas = []
        for q in range(per_paragraph):
            qid = f"q{a}{q:03d}"
            texts = [f"Lake Mira{a}", f"the Lake Mira{a}"] if q % 2 else [f"Kaya{a}"]
            qas.append(
                {
                    "id": qid,
                    "question": f"Question {q} about article {a}?",
                    "answers": [
                        {"answer_start": context.index(t.removeprefix("the ")), "text": t} for t in texts
                    ],
                }
            )
            answers[qid] = texts
        data.append({"title": f"Article_{a}", "paragraphs": [{"context": context, "qas": qas}]})
    path.write_text(json.dumps({"version": version, "data": data}))
    return answers


# A tiny synset tree: internal nodes (num_children > 0) and leaves whose ILSVRC2012_IDs
# are not in WNID order, as in the real meta.mat.
SYNSETS = [  # (ILSVRC2012_ID, WNID, num_children)
    (1, "n03000000", 0),
    (2, "n01000000", 0),
    (3, "n02000000", 0),
    (4, "n09000000", 2),
]


def make_devkit(path: Path, truth_ids: list[int]) -> None:
    from scipy.io import savemat

    dtype = [("ILSVRC2012_ID", "O"), ("WNID", "O"), ("words", "O"), ("num_children", "O")]
    synsets = np.array([(np.int32(i), w, f"thing {i}", np.int32(c)) for i, w, c in SYNSETS], dtype=dtype)
    meta = io.BytesIO()
    savemat(meta, {"synsets": synsets})
    truth = "".join(f"{i}\n" for i in truth_ids).encode()
    with tarfile.open(path, "w:gz") as tar:
        _add(tar, "ILSVRC2012_devkit_t12/data/meta.mat", meta.getvalue())
        _add(tar, "ILSVRC2012_devkit_t12/data/ILSVRC2012_validation_ground_truth.txt", truth)


def make_val_tar(path: Path, sizes: list[tuple[int, int]], seed: int = 0) -> None:
    from PIL import Image

    rng = np.random.default_rng(seed)
    with tarfile.open(path, "w") as tar:
        for i, (w, h) in enumerate(sizes, start=1):
            buf = io.BytesIO()
            Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(buf, "JPEG")
            _add(tar, f"ILSVRC2012_val_{i:08d}.JPEG", buf.getvalue())
