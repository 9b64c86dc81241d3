"""Where a ``Result`` is made: the only constructor calls of the type (a test holds this).

A run's record starts here, from what the run plan and the preparation know, before
training (so a crash from then on still leaves a record). Each stage returns its own typed
part (training: ``TrainingRun``, its ``TrainingSummary``, the guards' ``GuardVerdict`` and
the energy section; inference: ``BackendRun`` records and the timed-model checks), and the
functions here put them into the record: nothing else changes a ``Result`` (a test holds
this). A Slurm task that never ran the entry gets a placeholder made here too, so its run
is not silently lost. Reading a written result back is ``Result.read``.
"""

from __future__ import annotations

from runner import __version__
from runner.plan import Prepared, SeedRun
from runner.profiles import price_fields
from runner.results.record import Cost, DataInfo, EntryInfo, ImageInfo, Result, TaskInfo, Toolkit
from runner.results.schema import RESULT_SCHEMA_VERSION


def _entry_info(entry) -> EntryInfo:
    return EntryInfo(entry.name, entry.model, entry.framework, entry.source, entry.claimed, entry.digests())


def _task_info(task) -> TaskInfo:
    return TaskInfo(task.id, task.metric, task.threshold, task.eval_size)


def _rules_info(task) -> dict:
    """The version of the task's rules the run is made under (today's)."""
    return {"task": task.id, "version": task.rules_version}


def started(plan: SeedRun, prepared: Prepared, probe: dict | None = None) -> Result:
    """The record of a run about to train: status "running", every section known so far (from
    the run's plan and what the shared stages found)."""
    entry, built, staged = plan.entry, prepared.built, prepared.staged
    tree = staged.train_tree
    return Result(
        schema_version=RESULT_SCHEMA_VERSION,
        run_id=plan.run_id,
        toolkit=Toolkit("runner", __version__, prepared.harness_digest),
        entry=_entry_info(entry),
        task=_task_info(entry.task),
        seed=plan.seed,
        smoke=plan.smoke,
        status="running",
        incomplete_reason=None,
        conforming=not prepared.nonconforming,
        nonconforming_reasons=list(prepared.nonconforming),
        image=ImageInfo(built.image_id, built.tag, built.base.id, built.base.tag),
        data=DataInfo(entry.task.id, staged.digest, staged.source, tree.digest if tree is not None else None),
        cost=Cost(training_usd=None, **price_fields(plan.profile)),
        hardware=prepared.hardware,
        image_audit=prepared.inspection.summary(),  # its name in result.json since the format began
        hyperparameters=dict(plan.hyperparameters),
        public_inputs=[p.record() for p in prepared.public] or None,
        probe=probe,
        variant=plan.variant,
        rules=_rules_info(entry.task),
        isolation=prepared.isolation,
    )


def initialized(result: Result, init: dict, record_file: str, sha256: str) -> None:
    """The initial weights the runner drew for the run (``init``: ``init.json``'s content)."""
    result.initial_weights = {"record": record_file, "record_sha256": sha256, "values_sha256": init["sha256"],
                              "tensors": len(init["tensors"]), "drawn_elements": init["drawn_elements"],
                              "undrawn": init["undrawn"]}


def planned(result: Result, plan_file: str, sha256: str) -> None:
    """The plan the run was started from, saved beside it (``plan.json``): ``runner verify``
    holds a result that records one to a plan that describes it."""
    result.plan = {"file": plan_file, "sha256": sha256}


def trained(result: Result, *, run, summary, guards, energy: dict | None, train_samples: int | None,
            training_usd: float | None) -> None:
    """The training stage's parts: the container's outcome (``TrainingRun``), the scored
    training section and its verdicts (``TrainingSummary``), what the guards saw
    (``GuardVerdict``: contention, output quota, GPU sharing), the energy section, and on a run
    spanning nodes what its other nodes turned out to be."""
    result.ended("complete" if run.outcome.ok else "incomplete", run.outcome.reason())
    result.training = summary.training
    result.training.wall_clock_start_unix_ms = run.started_unix_ms
    result.training.train_samples = train_samples
    if summary.invalid and result.status == "complete":
        result.ended("invalid", summary.invalid)
    for reason in summary.nonconforming:
        result.not_conforming(reason)
    if training_usd is not None and result.cost is not None:  # a started run's record has its cost
        result.cost.training_usd = training_usd
    if run.nodes is not None and run.nodes.mismatches:
        hardware = result.hardware or {}
        result.hardware = {**hardware, "matched": False, "allowed_mismatch": True,
                           "mismatches": [*hardware["mismatches"], *run.nodes.mismatches]}
    for reason in run.nodes.nonconforming if run.nodes is not None else ():
        result.not_conforming(reason)
    if guards.gpu_sharing is not None:
        result.gpu_sharing = guards.gpu_sharing.to_dict()
    if energy is not None:
        result.energy = energy
    guarded(result, guards)


def guarded(result: Result, guards) -> None:
    """What the run's guards saw (``runner.run.guards.GuardVerdict``): a reason the run is
    incomplete (the output quota), other tenants' contention as non-conformance, and the
    runner's own share of the run's cores as a note (said once)."""
    if guards.incomplete:
        result.ended("incomplete", guards.incomplete)
    for reason in guards.nonconforming:
        result.not_conforming(reason)
    if result.training is not None:
        for note in guards.notes:
            if note not in result.training.notes:
                result.training.notes.append(note)


def inferred(result: Result, inference: dict, check) -> None:
    """The inference stage's parts: its typed backend records (``BackendRun``) and the checks
    of the model they timed (``runner.score.timed_model.TimedModelCheck``)."""
    result.inference = inference
    t = result.training
    if check.predict_seconds is not None and t is not None and t.model_origin is not None:
        t.model_origin["predict_seconds"] = check.predict_seconds
    for backend, disagreement in check.disagreements.items():
        if backend in inference:
            inference[backend].final_model_disagreement = disagreement
    for problem in check.problems:
        result.not_conforming(problem)


def final_evaluated(result: Result, final_model: dict, model_origin: dict | None, problems: list[str]) -> None:
    """The evaluation of the final model that a run without inference deferred
    (``runner.run.final_model.evaluate_deferred``, run by ``runner reinfer``): the scored
    record, the model-origin checks recomputed with it, and what they found."""
    if result.training is None:
        raise ValueError(f"run {result.run_id} has no training section to add its final model's evaluation to")
    result.training.final_model = final_model
    result.training.model_origin = model_origin
    for problem in problems:
        result.not_conforming(problem)


def timed(result: Result, timings: dict) -> None:
    """Where the run's time went (``runner.timings.Timings``), as far as it has run."""
    result.timings = timings


def marked(result: Result, reasons: list[str]) -> list[str]:
    """Non-conforming for ``reasons`` found after the run (across runs, by the bundle's
    checks, by Slurm gathering); returns those that are new."""
    new = [r for r in reasons if r not in result.nonconforming_reasons]
    for reason in reasons:
        result.not_conforming(reason)
    return new


def compared_across_seeds(result: Result, record: dict, reasons: list[str]) -> list[str]:
    """The run's cross-seed record (``runner.score.across_runs``) and the class 4 reasons it
    gave; returns the reasons that are new."""
    if result.training is not None:
        result.training.cross_seed = record
    return marked(result, reasons)


def gathered(result: Result, record: dict) -> None:
    """Slurm's part of a gathered run (``runner.slurm.gather.slurm_record``): its job, and a
    state other than COMPLETED as the reason it is incomplete."""
    result.slurm = record
    if record["state"] != "COMPLETED":
        why = f"slurm job {record['job_id']} {record['state']}"
        own = result.incomplete_reason
        result.ended("incomplete" if result.status in ("complete", "running") else result.status,
                     f"{why}; {own}" if own else why)


def left_out(result: Result, note: str) -> None:
    """Files the bundle left out, unread (``runner.bundle``): a training note, or, without a
    training section, a reason the run is non-conforming."""
    if result.training is not None:
        result.training.notes.append(note)
    else:
        result.not_conforming(note)


def ledgered(result: Result, place: dict) -> None:
    """The run's place in its signing key's ledger (``runner.keys.ledger.position``), recorded
    just before it is signed (``runner.bundle``)."""
    result.ledger = dict(place)


def stopped(result: Result, reason: str) -> None:
    """A run stopped by a failure or an interrupt before it was scored: incomplete, saying why
    (a run already scored keeps the status its scoring gave)."""
    if result.status == "running":
        result.ended("incomplete", reason)


def killed(result: Result, reason: str) -> None:
    """A run whose runner was killed mid-run (found at the next start): incomplete, saying so."""
    result.ended("incomplete", reason)


def placeholder(*, run_id: str, entry, seed: int, smoke: bool, reason: str) -> Result:
    """The record of a run that never started the entry (a Slurm task that died first)."""
    return Result(
        schema_version=RESULT_SCHEMA_VERSION, run_id=run_id, toolkit=None,
        entry=_entry_info(entry), task=_task_info(entry.task), seed=seed, smoke=smoke, rules=_rules_info(entry.task),
        status="incomplete", incomplete_reason=None, conforming=False, nonconforming_reasons=[reason],
        image=None, data=None, cost=None, hardware=None,
    )
