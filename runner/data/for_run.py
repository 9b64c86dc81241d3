"""What one run trains on: its staged data set (or a smoke run's synthetic stand-in), the
training tree checked where the task keeps one, and the public inputs its manifest declares.

The same staging on every node of a run: the local pipeline and each node agent call it.
"""

from __future__ import annotations

from pathlib import Path


from runner import data
from runner.data.public_inputs import StagedInput, for_run
from runner.data.store import StagedData
from runner.data.synthetic import smoke_data
from runner.errors import UserError
from runner.report import reporter

def stage_data(entry, smoke: bool, scratch: Path) -> StagedData:
    """The data a run trains and is scored on (every node of a run spanning nodes stages its own)."""
    if smoke:
        return smoke_data(entry.task.id, scratch / "smoke-data")
    try:
        staged = data.staged(entry.task.id)
    except UserError:
        if entry.task.id not in data.PREPARABLE:
            raise
        reporter().print(f"[bold]data[/] {entry.task.id} is not staged yet: preparing it")
        return data.prepare(entry.task.id)
    if entry.task.id in data.TREE_TASKS:
        check_train_tree(staged)
    return staged


def check_train_tree(staged: StagedData) -> None:
    """A training set kept as a tree (ImageNet) must be imported, and unchanged since: every
    file's size and time, and a sample of digests (``runner data check --full``: all)."""
    if staged.train_tree is None:
        raise UserError(f"the {staged.task} training set is not imported", data.HOW_TO_STAGE[staged.task])
    report = data.SOURCES[staged.task].load_tree().check_tree(staged.train_tree)
    reporter().print(f"[bold]data[/] training tree {staged.train_tree.root}: {report.files:,} files' sizes and "
                  f"times, {report.hashed} sampled digests checked in {report.seconds:.1f} s")


def stage_public_inputs(entry, smoke: bool, staged: StagedData, scratch: Path) -> list[StagedInput]:
    """The manifest's public inputs, checked (a smoke run: synthetic, from its data's words)."""
    if not entry.public_inputs:
        return []
    words = entry.task.smoke_vocabulary(staged) if smoke else None
    return for_run(entry.task, list(entry.public_inputs), smoke, scratch, words)
