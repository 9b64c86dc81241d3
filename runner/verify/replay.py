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
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from runner import data
from runner.build import build_entry
from runner.data.synthetic import smoke_data
from runner.bundle.open import open_bundle
from runner.engine import get_client
from runner.errors import UserError
from runner.manifest import load_entry
from runner.profiles import load_profile
from runner.results.record import Result, Training
from runner.run.evaluator import Evaluator, EvaluatorError, EvaluatorInputs
from runner.score.probe import make_probe_inputs

GPU_TOLERANCE = 0.001  # fraction of items whose class may differ between GPU replays


@dataclass
class ReplayCheck:
    name: str
    ok: bool
    detail: str


def _compare(name: str, replayed: Path, recorded: Path, tolerance: float) -> ReplayCheck:
    if not recorded.is_file():
        return ReplayCheck(name, False, f"the bundle has no {recorded.name} to compare with")
    if recorded.suffix == ".json":  # a question task's {id: answer}
        from runner.score.evaluations import load_predictions

        x, y = load_predictions(replayed), load_predictions(recorded)
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


def replay(bundle: Path, console) -> list[ReplayCheck]:
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
        with tempfile.TemporaryDirectory(prefix="runner-replay-") as tmp:
            tmp = Path(tmp)
            folder = tmp / result.entry.name
            shutil.copytree(entry_files, folder)
            entry = load_entry(folder)
            if result.smoke:
                entry = entry.for_smoke()
                staged = smoke_data(entry.task.id, tmp / "smoke-data")
            else:
                staged = data.staged(entry.task.id)
            client = get_client()
            console.print(f"[bold]build[/] {entry.name} from the bundle's files")
            built = build_entry(entry, client)
            # Informational: the predictions must match, the image bytes need not.
            checks = [ReplayCheck(
                "image", True,
                f"rebuilt {built.image_id[:19]}; the run used {result.image.id[:19]}",
            )]
            probe_dir = make_probe_inputs(staged.eval_dir, tmp / "probe", result.seed)
            checkpoints = tmp / "checkpoints"
            checkpoints.mkdir()
            crossing = training.crossing
            final = training.final_model or {}
            jobs = []  # (name, checkpoint file, recorded clean, recorded probe)
            if isinstance(crossing, int):
                evaluation = training.evaluations[crossing]
                kept = sorted((root / "checkpoints").glob(f"{crossing}.*"))
                if not kept:
                    checks.append(ReplayCheck("crossing", False, "the crossing checkpoint is not in the bundle"))
                else:
                    shutil.copyfile(kept[0], checkpoints / kept[0].name)
                    jobs.append(("crossing", kept[0].name, evaluation.get("predictions"),
                                 evaluation.get("probe_predictions")))
            weights = root / "output" / str(final.get("weights", ""))
            if final.get("predictions") and weights.is_file():
                name = "final" + weights.suffix
                shutil.copyfile(weights, checkpoints / name)
                jobs.append(("final-model", name, final.get("predictions"), final.get("probe_predictions")))
            gpus = load_profile(entry.hardware_profile).gpu_count if not result.smoke else 0
            tolerance = GPU_TOLERANCE if gpus else 0.0
            evaluator = Evaluator(client, EvaluatorInputs(
                image=built.image_id, builder=entry.inference.builder, framework=entry.framework["name"], eval_dir=Path(staged.eval_dir),
                probe_dir=probe_dir, checkpoints_dir=checkpoints, evaluations_dir=tmp / "evaluations",
                requests_dir=tmp / "requests", log_path=tmp / "evaluator.log",
                topk=entry.task.topk, threads=1, cpus=None, memory=None,
                gpus=1 if gpus else 0, timeout_s=3600, builder_limit_s=entry.inference.builder_seconds,
                kind=entry.task.inputs,
            ))
            try:
                for index, (name, checkpoint, clean, probe) in enumerate(jobs):
                    console.print(f"[bold]evaluate[/] {name} ({checkpoint})")
                    try:
                        files = evaluator.evaluate(index, checkpoint).files
                    except EvaluatorError as err:
                        checks.append(ReplayCheck(name, False, f"the evaluator failed: {err}"))
                        continue
                    checks.append(_compare(name, tmp / "evaluations" / files["clean"], root / str(clean), tolerance))
                    if probe and "probe" in files:
                        checks.append(_compare(f"{name}-probe", tmp / "evaluations" / files["probe"],
                                               root / str(probe), tolerance))
            finally:
                evaluator.close()
            if not jobs:
                checks.append(ReplayCheck("models", False, "nothing to replay: no crossing checkpoint and no final model"))
            return checks
    finally:
        opened.close()
