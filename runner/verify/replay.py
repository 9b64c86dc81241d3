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
from runner.engine import get_engine
from runner.errors import UserError
from runner.options import ReproduceOptions
from runner.plan import Limits, RunData, RunPlan, make_plan
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
    opened = open_bundle(bundle)
    try:
        root = opened.root
        try:
            result = Result.read(root)
        except ValueError as err:
            raise UserError(f"{bundle} holds no readable result: {err}", "pass a bundle written by runner") from None
        training = result.training or Training(wall_seconds=0.0)
        entry_files = root / "entry"
        if not entry_files.is_dir():
            raise UserError(f"{bundle} holds no entry files to rebuild from",
                            "replay needs a bundle made by runner 0.1 with the new run contract")
        with tempfile.TemporaryDirectory(prefix="runner-replay-") as scratch:
            tmp = Path(scratch)
            folder = tmp / result.entry.name
            shutil.copytree(entry_files, folder)
            # The plan saved with the result, over the bundle's own entry files (a result
            # written before plans were saved: the plan of its seed and kind), once it is
            # known to describe the result (``verify``'s own check).
            verdict = check_plan(Evidence(root, Auditor(), tmp))
            if not verdict.ok:
                raise UserError(f"{bundle}: {verdict.detail}", "replay only a bundle whose files runner wrote together")
            plan = RunPlan.read(root, folder) or make_plan(
                folder, ReproduceOptions(seed=result.seed, runs=1, smoke=result.smoke))
            entry = plan.entry
            if plan.smoke:
                staged = smoke_data(entry.task.id, tmp / "smoke-data")
            else:
                staged = data.staged(entry.task.id)
            engine = get_engine()
            reporter().print(f"[bold]build[/] {entry.name} from the bundle's files")
            built = build_entry(entry, engine)
            # Informational: the predictions must match, the image bytes need not.
            checks = [ReplayCheck(
                "image", True,
                f"rebuilt {built.image_id[:19]}; the run used "
                f"{result.image.id[:19] if result.image else 'no recorded image'}",
            )]
            probe_dir = make_probe_inputs(staged.eval_dir, tmp / "probe", result.seed)
            gpus = plan.profile.gpu_count if not plan.smoke else 0
            # The auditor's host: one thread, no core or memory limit, one GPU where the run had them.
            plan = replace(
                plan.resolved(gpus=1 if gpus else 0, backends=[], image=built.image_id,
                              data=RunData(Path(staged.train_dir), Path(staged.eval_dir), staged.digest)),
                limits=Limits(cpus=None, memory=None, gpus=1 if gpus else 0, threads=1, timeout_s=0),
            ).for_run(result.seed, Path(tmp), Path(tmp), probe_dir)
            checkpoints = plan.checkpoints_dir
            checkpoints.mkdir()
            crossing = training.crossing
            final = training.final_model or {}
            jobs = []  # (name, checkpoint file, recorded clean, recorded probe, the probe's (items, seed))
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
                jobs.append(("final-model", name, final.get("predictions"), final.get("probe_predictions"),
                             _subset(final)))
            tolerance = GPU_TOLERANCE if gpus else 0.0
            evaluator = Evaluator(engine, plan)
            try:
                for index, (name, checkpoint, clean, probe, subset) in enumerate(jobs):
                    reporter().print(f"[bold]evaluate[/] {name} ({checkpoint})")
                    try:  # the probe's items as the run drew them (every item where it recorded none)
                        files = evaluator.evaluate(index, checkpoint, probe_items=subset).files
                    except EvaluatorError as err:
                        checks.append(ReplayCheck(name, False, f"the evaluator failed: {err}"))
                        continue
                    checks.append(_compare(name, plan.evaluations_dir / files["clean"], root / str(clean), tolerance))
                    if probe and "probe" in files:
                        checks.append(_compare(f"{name}-probe", plan.evaluations_dir / files["probe"],
                                               root / str(probe), tolerance))
            finally:
                evaluator.close()
            if not jobs:
                checks.append(ReplayCheck("models", False, "nothing to replay: no crossing checkpoint and no final model"))
            return checks
    finally:
        opened.close()
