"""Where a ``Result`` is made: the only constructor calls of the type (a test holds this).

A run's record starts here, from what the run plan and the preparation know, before
training (so a crash from then on still leaves a record); each stage then fills its own
section. A Slurm task that never ran the entry gets a placeholder made here too, so its
run is not silently lost. Reading a written result back is ``Result.read``.
"""

from __future__ import annotations

from runner import __version__
from runner.results.record import Cost, DataInfo, EntryInfo, ImageInfo, Result, TaskInfo, Toolkit
from runner.results.schema import RESULT_SCHEMA_VERSION


def _entry_info(entry) -> EntryInfo:
    return EntryInfo(entry.name, entry.model, entry.framework, entry.source, entry.claimed, entry.digests())


def _task_info(task) -> TaskInfo:
    return TaskInfo(task.id, task.metric, task.threshold, task.eval_size)


def started(*, run_id: str, entry, seed: int, smoke: bool, harness_digest: str, built, staged,
            price: dict, hardware: dict, nonconforming: list[str], audit: dict | None,
            hyperparameters: dict[str, str], public_inputs: list[dict] | None) -> Result:
    """The record of a run about to train: status "running", every section known so far."""
    tree = getattr(staged, "train_tree", None)
    return Result(
        schema_version=RESULT_SCHEMA_VERSION,
        run_id=run_id,
        toolkit=Toolkit("runner", __version__, harness_digest),
        entry=_entry_info(entry),
        task=_task_info(entry.task),
        seed=seed,
        smoke=smoke,
        status="running",
        incomplete_reason=None,
        conforming=not nonconforming,
        nonconforming_reasons=list(nonconforming),
        image=ImageInfo(built.image_id, built.tag, built.base.id, built.base.tag),
        data=DataInfo(entry.task.id, staged.digest, staged.source, tree.digest if tree is not None else None),
        cost=Cost(training_usd=None, **price),
        hardware=hardware,
        image_audit=audit,
        hyperparameters=dict(hyperparameters),
        public_inputs=public_inputs,
    )


def placeholder(*, run_id: str, entry, seed: int, smoke: bool, reason: str) -> Result:
    """The record of a run that never started the entry (a Slurm task that died first)."""
    return Result(
        schema_version=RESULT_SCHEMA_VERSION, run_id=run_id, toolkit=None,
        entry=_entry_info(entry), task=_task_info(entry.task), seed=seed, smoke=smoke,
        status="incomplete", incomplete_reason=None, conforming=False, nonconforming_reasons=[reason],
        image=None, data=None, cost=None, hardware=None,
    )
