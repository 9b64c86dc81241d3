"""Reading staged data sets: ``StagedData`` and the lookup the runner calls before a run."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

import numpy as np

from runner import paths
from runner.errors import UserError
from runner.staging.checks import file_digest
from runner.staging.stage import STAGED_JSON, data_digest
from runner.tasks import TASKS, get_task

if TYPE_CHECKING:  # the one tree kind so far; a task's tree_module defines its own TrainTree
    from runner.tasks.imagenet.train_tree import TrainTree

# A task's evaluation labels as the host holds them: int64 class labels, or SQuAD's
# {question_id: [answers...]}.
EvalLabels: TypeAlias = "np.ndarray | dict[str, list[str]]"

# How a user stages each task (its declaration's ``source.how_to_stage``); the big ones
# cannot be fetched here.
HOW_TO_STAGE = {t.id: t.source.how_to_stage for t in TASKS.values() if t.source is not None}


@dataclass(frozen=True)
class StagedData:
    """A staged data set.

    ``train_dir`` and ``eval_dir`` are what a container may see (read-only); ``labels``
    is the host-only folder with the evaluation labels, never mounted anywhere. A set whose
    training split is a tree of files (ImageNet) has ``train_tree``, and ``train_dir`` is
    that tree's root.
    """

    task: str
    root: Path
    train_dir: Path
    eval_dir: Path
    labels: Path
    digest: str  # "sha256:..." over every staged file
    source: str
    source_digest: str | None = None
    conforming: bool = True
    counts: dict[str, int] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # relpath -> sha256
    train_tree: TrainTree | None = None  # the task's DataSource.tree_module
    details: dict = field(default_factory=dict)  # staged.json's details (preprocessing, a second test set's files)

    def load_eval_labels(self) -> EvalLabels:
        """The int64 evaluation labels, or for SQuAD ``{question_id: [answers...]}``."""
        answers = self.labels / "answers.json"
        if answers.exists():
            return json.loads(answers.read_text(encoding="utf-8"))
        return np.load(self.labels / "eval_labels.npy", allow_pickle=False)

    def verify(self) -> None:
        """Re-hash every staged file against ``staged.json`` (slow for big sets)."""
        for rel, want in self.files.items():
            path = self.root / rel
            if not path.is_file():
                raise UserError(
                    f"staged {self.task} is missing {rel}", HOW_TO_STAGE.get(self.task, "stage it again")
                )
            got = file_digest(path, show=True)
            if got != want:
                raise UserError(
                    f"staged {self.task} file {rel} has changed since staging "
                    f"(sha256 {got}, recorded {want})",
                    HOW_TO_STAGE.get(self.task, "stage it again"),
                )


def load(root: Path) -> StagedData:
    """Read ``root/staged.json``; checks that every recorded file is there with its size."""
    root = Path(root)
    record_path = root / STAGED_JSON
    try:
        record = json.loads(record_path.read_text())
    except FileNotFoundError:
        raise UserError(f"no staged data set at {root}", "stage it again") from None
    except json.JSONDecodeError as err:
        raise UserError(f"{record_path} is not valid JSON ({err})", "stage the data set again") from None
    task = record.get("task", root.name)
    files = record.get("files", {})
    fix = HOW_TO_STAGE.get(task, "stage the data set again")
    if data_digest(files) != record.get("digest"):
        raise UserError(f"{record_path} is inconsistent (its digest does not match its files)", fix)
    for rel, size in record.get("sizes", {}).items():
        path = root / rel
        if not path.is_file() or path.stat().st_size != size:
            raise UserError(f"staged {task} is damaged: {rel} is missing or has the wrong size", fix)
    return StagedData(
        task=task,
        root=root,
        train_dir=root / "train",
        eval_dir=root / "eval",
        labels=root / "labels",
        digest=record["digest"],
        source=record.get("source", "unknown"),
        source_digest=record.get("source_digest"),
        conforming=bool(record.get("conforming", False)),
        counts=dict(record.get("counts", {})),
        files=dict(files),
        details=dict(record.get("details") or {}),
    )


def task_root(task_id: str) -> Path:
    return paths.data_dir() / task_id


# Tasks whose training split is imported as a tree of files, beside the staged set: the
# tree's folder under the data folder (``source.tree``).
TREE_TASKS = {t.id: t.source.tree for t in TASKS.values() if t.source is not None and t.source.tree}


def train_tree(task_id: str):
    """The imported training tree of ``task_id`` (its tree module's ``TrainTree``), or None."""
    source = get_task(task_id).source if task_id in TREE_TASKS else None
    if source is None:  # (a task with a tree has a source: TREE_TASKS)
        return None
    return source.load_tree().load_tree(paths.data_dir() / TREE_TASKS[task_id])


def _with_tree(data: StagedData) -> StagedData:
    tree = train_tree(data.task)
    if tree is None:
        return data
    return replace(data, train_dir=tree.root, train_tree=tree,
                   counts={**data.counts, "train": tree.counts["train"]})


def staged(task_id: str, *, verify: bool = False) -> StagedData:
    """The staged data set for ``task_id``; ``verify`` re-hashes every file."""
    get_task(task_id)  # unknown task ids fail with the list of known ones
    root = task_root(task_id)
    if not (root / STAGED_JSON).is_file():
        raise UserError(f"data set {task_id} is not staged", HOW_TO_STAGE[task_id])
    data = _with_tree(load(root))
    if verify:
        data.verify()
    return data


def list_staged() -> list[StagedData]:
    """Every data set staged under ``paths.data_dir()``, by task id."""
    base = paths.data_dir()
    if not base.is_dir():
        return []
    found = []
    for root in sorted(base.iterdir()):
        if not root.name.startswith(".") and (root / STAGED_JSON).is_file():
            found.append(_with_tree(load(root)))
    return found
