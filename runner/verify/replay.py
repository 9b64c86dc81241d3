"""``runner audit BUNDLE --replay``: rebuild the entry from the bundle's own files and
re-evaluate the crossing checkpoint and the final model, requiring the same predictions.

This is the part of an audit that needs Docker: ``runner verify`` trusts nothing the
bundle claims but the predictions files; a replay checks that those predictions are what
the kept checkpoint and the final model give, with the same builder, on the auditor's
own evaluation data (exactly on CPUs; on GPUs a stated fraction of items may differ).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from runner import data
from runner.entry_build import build_entry
from runner.data.synthetic import smoke_data
from runner.bundle.open import open_bundle
from runner.engine import Engine, get_engine
from runner.errors import UserError
from runner.options import ReproduceOptions
from runner.plan import Limits, RunData, RunPlan, SeedRun, make_plan
from runner.results.record import Result, Training
from runner.run.evaluator import Evaluator, EvaluatorError
from runner.score.probe import make_probe_inputs
from runner.verify.evidence import Auditor, Evidence
from runner.verify.plan import check_plan
from runner.report import reporter
from runner.score.evaluations import load_predictions

GPU_TOLERANCE = 0.001  # fraction of items whose class may differ between GPU replays


@dataclass
class ReplayCheck:
    name: str
    ok: bool
    detail: str


def _subset(record: dict) -> tuple[int, int] | None:
    items, seed = record.get("probe_items"), record.get("probe_seed")
    if (isinstance(items, int) and not isinstance(items, bool) and isinstance(seed, int)
            and not isinstance(seed, bool) and items > 0):
        return items, seed
    return None


def _compare(name: str, replayed: Path, recorded: Path, tolerance: float) -> ReplayCheck:
    if not recorded.is_file():
        return ReplayCheck(name, False, f"the bundle has no {recorded.name} to compare with")
    if recorded.suffix == ".json":  # a question task's {id: answer}
        try:
            x, y = load_predictions(replayed), load_predictions(recorded)
        except ValueError as err:  # not {id: answer} (or over its cap): nothing to compare
            return ReplayCheck(name, False, f"replayed or recorded answers are unreadable ({err})")
        if not isinstance(x, dict) or not isinstance(y, dict) or set(x) != set(y):
            return ReplayCheck(name, False, "replayed and recorded answers are not for the same questions")
        differ = sum(x[k] != y[k] for k in y)
        if differ / max(1, len(y)) > tolerance:
            return ReplayCheck(name, False, f"{differ} of {len(y)} answers differ (tolerance {tolerance:g})")
        return ReplayCheck(name, True, f"{len(y) - differ} of {len(y)} answers identical")
    a, b = np.load(replayed, allow_pickle=False), np.load(recorded, allow_pickle=False)
    if a.shape != b.shape:
        return ReplayCheck(name, False, f"replayed shape {a.shape}, recorded {b.shape}")
    differ = int((a != b).reshape(len(a), -1).any(axis=1).sum())
    if differ / max(1, len(a)) > tolerance:
        return ReplayCheck(name, False, f"{differ} of {len(a)} predictions differ (tolerance {tolerance:g})")
    return ReplayCheck(name, True, f"{len(a) - differ} of {len(a)} predictions identical")


def replay(bundle: Path) -> list[ReplayCheck]:
    """Rebuild the bundle's entry, evaluate its crossing checkpoint and final model again on
    this host as the run's plan says, and compare the predictions with the signed ones."""
    opened = open_bundle(bundle)
    try:
        root = opened.root
        try:
            result = Result.read(root)
        except ValueError as err:
            raise UserError(f"{bundle} holds no readable result: {err}", "pass a bundle written by runner") from None
        if not (root / "entry").is_dir():
            raise UserError(f"{bundle} holds no entry files to rebuild from",
                            "replay needs a bundle made by runner 0.1 with the new run contract")
        with tempfile.TemporaryDirectory(prefix="runner-replay-") as scratch:
            tmp = Path(scratch)
            plan = _saved_plan(bundle, root, result, tmp)
            engine = get_engine()
            reporter().print(f"[bold]build[/] {plan.entry.name} from the bundle's files")
            built = build_entry(plan.entry, engine)
            # Informational: the predictions must match, the image bytes need not.
            checks = [ReplayCheck(
                "image", True,
                f"rebuilt {built.image_id[:19]}; the run used "
                f"{result.image.id[:19] if result.image else 'no recorded image'}",
            )]
            run = _auditor_run(plan, built.image_id, result.seed, tmp)
            run.checkpoints_dir.mkdir()
            jobs = _jobs(root, result.training or Training(wall_seconds=0.0), run.checkpoints_dir, checks)
            checks += _evaluate(engine, run, jobs, root, GPU_TOLERANCE if run.limits.gpus else 0.0)
            if not jobs:
                checks.append(ReplayCheck("models", False, "nothing to replay: no crossing checkpoint and no final model"))
            return checks
    finally:
        opened.close()


def _saved_plan(bundle: Path, root: Path, result: Result, tmp: Path) -> RunPlan:
    """The plan saved with the result, over a copy of the bundle's own entry files (a result
    written before plans were saved: the plan of its seed and kind), once it is known to
    describe the result (``verify``'s own check)."""
    folder = tmp / result.entry.name
    shutil.copytree(root / "entry", folder)
    verdict = check_plan(Evidence(root, Auditor(), tmp))
    if not verdict.ok:
        raise UserError(f"{bundle}: {verdict.detail}", "replay only a bundle whose files runner wrote together")
    return RunPlan.read(root, folder) or make_plan(folder, ReproduceOptions(seed=result.seed, runs=1, smoke=result.smoke))


def _auditor_run(plan: RunPlan, image: str, seed: int, tmp: Path) -> SeedRun:
    """The run on the auditor's host: the data staged here (a smoke run's regenerated), one
    thread, no core or memory limit, one GPU where the run had them, the run's seed's probe."""
    staged = smoke_data(plan.entry.task.id, tmp / "smoke-data") if plan.smoke else data.staged(plan.entry.task.id)
    probe_dir = make_probe_inputs(staged.eval_dir, tmp / "probe", seed)
    gpus = 1 if plan.profile.gpu_count and not plan.smoke else 0
    return replace(
        plan.resolved(gpus=gpus, backends=[], image=image,
                      data=RunData(Path(staged.train_dir), Path(staged.eval_dir), staged.digest)),
        limits=Limits(cpus=None, memory=None, gpus=gpus, threads=1, timeout_s=0),
    ).for_run(seed, tmp, tmp, probe_dir)


# What to evaluate again: (name, checkpoint file, recorded clean, recorded probe, the probe's (items, seed)).
Job = tuple[str, str, "str | None", "str | None", "tuple[int, int] | None"]


def _jobs(root: Path, training: Training, checkpoints: Path, checks: list[ReplayCheck]) -> list[Job]:
    """The crossing checkpoint and the final model the bundle keeps, copied into
    ``checkpoints``, with the predictions the run recorded for each."""
    jobs: list[Job] = []
    crossing, final = training.crossing, training.final_model or {}
    if isinstance(crossing, int):
        evaluation = training.evaluations[crossing]
        kept = sorted((root / "checkpoints").glob(f"{crossing}.*"))
        if not kept:
            checks.append(ReplayCheck("crossing", False, "the crossing checkpoint is not in the bundle"))
        else:
            shutil.copyfile(kept[0], checkpoints / kept[0].name)
            jobs.append(("crossing", kept[0].name, evaluation.get("predictions"),
                         evaluation.get("probe_predictions"), _subset(evaluation)))
    weights = root / "output" / str(final.get("weights", ""))
    if final.get("predictions") and weights.is_file():
        name = "final" + weights.suffix
        shutil.copyfile(weights, checkpoints / name)
        jobs.append(("final-model", name, final.get("predictions"), final.get("probe_predictions"), _subset(final)))
    return jobs


def _evaluate(engine: Engine, run: SeedRun, jobs: list[Job], root: Path, tolerance: float) -> list[ReplayCheck]:
    """Each job evaluated by the runner's evaluator on this host, compared with the record."""
    checks = []
    evaluator = Evaluator(engine, run)
    try:
        for index, (name, checkpoint, clean, probe, subset) in enumerate(jobs):
            reporter().print(f"[bold]evaluate[/] {name} ({checkpoint})")
            try:  # the probe's items as the run drew them (every item where it recorded none)
                files = evaluator.evaluate(index, checkpoint, probe_items=subset).files
            except EvaluatorError as err:
                checks.append(ReplayCheck(name, False, f"the evaluator failed: {err}"))
                continue
            checks.append(_compare(name, run.evaluations_dir / files["clean"], root / str(clean), tolerance))
            if probe and "probe" in files:
                checks.append(_compare(f"{name}-probe", run.evaluations_dir / files["probe"], root / str(probe),
                                       tolerance))
    finally:
        evaluator.close()
    return checks
