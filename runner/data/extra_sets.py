"""Second test sets: a task's items collected after its evaluation set by the same protocol
(``Task.extra_sets``: QMNIST's 50,000 lost MNIST test digits, CIFAR-10.1, ImageNetV2), on
which ``runner study generalization`` scores a run's final model.

They cannot be fetched here: the user imports a copy of the official files (``runner data
import NAME PATH``), each checked against the SHA-256 the set declares (published by the
sources its ``digest_source`` names) and read in its official format by the set's module in
its task's folder. The set is staged like an evaluation set, atomically
(``runner.staging.stage.Stage``): ``eval/images.npy`` for the runner's evaluator, the labels
host-only under ``labels/``, under the data folder's ``extra/<name>/``. ``--unofficial``
accepts other files (a stand-in, a newer release): their digests are recorded at import and
the set, and every figure on it, is marked unofficial. A wrong digest, a truncated file or
one of another format is refused in one line, and nothing of it is kept.

Each set's module also writes a stand-in in the official format (``write_standin``): the
tests import it like the real files, and a smoke study (``--smoke``) scores its synthetic
model on the task's synthetic items drawn with another seed, written and imported that way.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from runner import paths
from runner.staging.checks import UNCHECKED, Expected
from runner.staging.extra import find_files, how_to_import, official
from runner.data.store import StagedData, load
from runner.data.synthetic import SMOKE_SIZES, synthetic
from runner.errors import UserError
from runner.tasks import TASKS, ExtraSet, Task, extra_set

EXTRA_DIR = "extra"
SMOKE_SEED = 1  # the smoke run's own items are seed 0's (runner.data.synthetic.smoke_data)

NAMES = tuple(i.name for t in TASKS.values() for i in t.extra_sets)


def root(name: str) -> Path:
    return paths.data_dir() / EXTRA_DIR / name


def import_extra(name: str, path: str | Path, *, unofficial: bool = False,
                 expected: Expected | None = None, target: Path | None = None) -> StagedData:
    """Stage the user's copy of the second test set ``name``. ``expected`` replaces the
    published numbers (tests, smoke studies), ``target`` the data folder's place for it."""
    task, item = extra_set(name)
    want = expected if expected is not None else (UNCHECKED if unofficial else official(item))
    files = find_files(Path(path), item)
    where = Path(target) if target is not None else root(name)
    item.load().import_files(files, where, expected=want, task=task, item=item)
    return load(where)


def staged_extra(name: str) -> StagedData:
    """The imported second test set ``name``."""
    _, item = extra_set(name)
    folder = root(name)
    if not (folder / "staged.json").is_file():
        raise UserError(f"the second test set {name} is not imported", how_to_import(item))
    return load(folder)


def default_extra(task: Task) -> ExtraSet:
    if not task.extra_sets:
        raise UserError(f"task {task.id} declares no second test set",
                        "a task declares them in its folder (Task.extra_sets, docs/tasks.md)")
    return task.extra_sets[0]


def smoke_extra(task: Task, item: ExtraSet, work: Path) -> StagedData:
    """A smoke study's second test set: the task's synthetic items drawn with another seed
    than the smoke run's, written in the set's official format and imported by its own code
    (marked unofficial)."""
    drawn = synthetic(task.id, work / "drawn", n_train=0, n_eval=SMOKE_SIZES["n_eval"], seed=SMOKE_SEED)
    images = np.load(drawn.eval_dir / "images.npy")
    files = work / "files"
    files.mkdir(parents=True, exist_ok=True)
    item.load().write_standin(files, images, drawn.load_eval_labels())
    return import_extra(item.name, files, expected=Expected(official=False), target=work / item.name)


def shifted_items(images: np.ndarray, labels: np.ndarray, count: int, seed: int,
                  max_shift: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """A stand-in for new test items where the real ones cannot be had: ``count`` items drawn
    (with replacement, by ``seed``) from ``images`` (N x C x H x W uint8) and their labels,
    each moved by up to ``max_shift`` pixels in each direction (zeros fill in): a shift of
    known kind and size, never the real set."""
    rng = np.random.default_rng(seed)
    chosen = rng.integers(0, len(images), count)
    moves = rng.integers(-max_shift, max_shift + 1, (count, 2))
    out = np.zeros((count, *images.shape[1:]), dtype=np.uint8)
    height, width = images.shape[2:]
    for i, (k, (dy, dx)) in enumerate(zip(chosen, moves)):
        src = images[k][:, max(0, -dy):height - max(0, dy), max(0, -dx):width - max(0, dx)]
        out[i, :, max(0, dy):max(0, dy) + src.shape[1], max(0, dx):max(0, dx) + src.shape[2]] = src
    return out, np.asarray(labels)[chosen].astype(np.int64)
