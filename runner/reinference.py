"""Re-run only the inference phase on an existing result's trained model (``runner reinfer``).

A result is re-inferred in place: its newest full (not smoke) run, or a given folder, is first
held to its own bundle (``runner.verify.custody``: an edited result is never signed again)
and to the runner's record of what it measured (``runner.bundle.measured``: a run this host
never measured, or one edited and stripped of its bundle, is refused too), then checked to
hold a trained model of the same entry; the image that trained it times each backend given,
and those backends' records and files replace theirs while every other backend's are kept (a
per-backend merge: timing onnxruntime again leaves torch's figures); the folder is then
re-signed, held to that record once more for every file but those re-inference writes
(``REWRITES``, ``REWRITTEN_FIELDS``), and the record updated. The new files are made in a
temporary folder inside the result
and swapped in only when the harness ran to its end, so a failed re-run leaves the previous
inference intact. A result of a run that timed
no model (``--no-infer``) holds its final model's digest but no evaluation of it: the
runner's evaluator evaluates that model first (``_evaluate_final``), so what is timed is
checked against what was scored. The command line parses its flags, calls ``reinfer`` and
renders what it returns.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path


from runner import data, paths
from runner.engine.interface import Engine
from runner.errors import UserError
from runner.inference import TrainedModel, check_backends_available, run_inference
from runner.manifest import Entry, load_entry
from runner.options import ReproduceOptions
from runner.plan import RunData, make_plan
from runner.results.inference import BackendRun
from runner.results.record import Result
from runner.results import assemble
from runner.results.layout import entry_runs
from runner.events import read_events, write_events
from runner.score.timed_model import check_timed_model
from runner.verify.custody import require_intact
from runner.report import reporter
from runner.bundle import sign_folder
from runner.bundle.measured import require_measured
from runner.engine import get_engine
from runner.plan import EVALUATIONS_DIR, SeedRun
from runner.run.final_model import DeferredError, evaluate_deferred, probe_subset
from runner.score.evaluations import ScoredEvaluation
from runner.score.probe import make_probe_inputs
from runner.score.summary import final_record, model_origin


ACTION = "re-inference"
# What re-inference writes into a result (``swap_in``, ``_evaluate_final``); its re-signing
# holds every other file, and result.json's other fields, to the runner's record.
REWRITES = ("inference", "logs/infer.log", "logs/evaluator-final-model.log")
REWRITTEN_FIELDS = ("inference", "training.final_model", "training.model_origin", "conforming",
                    "nonconforming_reasons")


@dataclass(frozen=True)
class ReinferenceOutcome:
    """A re-inferred result: its folder, the task's metric and the new inference records."""

    result_dir: Path
    metric: str
    inference: dict[str, BackendRun]
    replaced: list[str]  # backends of the earlier inference phase timed again (their figures replaced)
    kept: list[str]  # backends of the earlier inference phase not timed again (their figures kept)

    @property
    def passed(self) -> bool:
        """Every backend passed the threshold gate (a latency that may be claimed)."""
        return all(rec.passed_gate for rec in self.inference.values())


def latest_result(entry_name: str) -> Path:
    """The entry's newest result that is not a smoke run (whose synthetic evaluation set was
    not kept, so it cannot be re-inferred)."""
    folder = paths.results_dir() / entry_name
    runs = entry_runs(paths.results_dir(), entry_name)  # oldest first: run ids start with a UTC stamp
    if not runs:
        raise UserError(f"no results for {entry_name} in {folder}",
                        f"run `runner reproduce entries/{entry_name}` first, or pass --result")
    full = [run for run in runs if not _is_smoke(run)]
    if not full:
        raise UserError(f"every result of {entry_name} in {folder} is a smoke run ({len(runs)}), whose synthetic "
                        "evaluation set was not kept", f"run `runner reproduce entries/{entry_name}` without --smoke")
    return full[-1]


def _is_smoke(run: Path) -> bool:
    try:
        return json.loads((run / "result.json").read_text()).get("smoke") is not False
    except (OSError, ValueError, AttributeError):
        return True  # unreadable: not a result to pick by default


def _read_result(result_dir: Path, entry: Entry) -> Result:
    try:
        result = Result.read(result_dir)
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read {result_dir / 'result.json'}: {exc}",
                        "pass a result folder written by `runner reproduce`") from None
    if result.entry.name != entry.name:
        raise UserError(f"{result_dir} is a result of {result.entry.name}, not {entry.name}",
                        "pass the matching entry folder")
    if result.smoke:
        raise UserError(f"{result_dir} is a smoke run, whose synthetic evaluation set was not kept",
                        "re-run `runner reproduce --smoke`, or pick a full result with --result")
    if result.image is None or result.data is None:
        raise UserError(f"{result_dir} is the record of a run that never started (it names no image or data)",
                        "pick a result whose training ran, or run `runner reproduce` again")
    weights = result_dir / "output" / entry.final_weights
    if not weights.is_file():
        raise UserError(f"{result_dir} has no trained model at {weights}",
                        "pick a result whose training completed, or run `runner reproduce` again")
    return result


def _image(engine: Engine, result: Result, entry: Entry) -> str:
    """The image that trained the result: by id, else by its content-addressed tag."""
    assert result.image is not None  # _read_result turned away a result with no image
    for ref in (result.image.id, result.image.tag):
        if ref and (image := engine.find_image(ref)) is not None:
            return image.id
    raise UserError(f"the image that trained this result ({result.image.tag or result.image.id}) is not in the engine",
                    f"rebuild it with `runner build entries/{entry.name}`")


def _staged(entry: Entry, result: Result):
    staged = data.staged(entry.task.id)
    assert result.data is not None  # _read_result turned away a result with no data
    recorded = result.data.digest
    if recorded and staged.digest != recorded:
        raise UserError(f"the staged {entry.task.id} data ({staged.digest}) is not the data this "
                        f"result was trained and scored on ({recorded})",
                        f"stage the same data again (`runner data prepare {entry.task.id}`)")
    return staged


def _evaluate_final(engine: Engine, entry: Entry, result: Result, result_dir: Path, staged, labels, image_id: str,
                    work_dir: Path) -> list[Path]:
    """Evaluate the final model a ``--no-infer`` run left unevaluated, in the run's own plan
    (its limits, its seed's probe), into ``work_dir``; its answers join the result's
    ``evaluations/`` and the result (in memory) gets the scored record and the model-origin
    checks recomputed with it. Returns the folders added to ``evaluations/`` (for the caller to
    take back should the re-run fail). Nothing to do for a result whose final model was evaluated."""
    t = result.training
    if t is None or not (isinstance(t.final_model, dict) and t.final_model.get("deferred")):
        return []
    record = t.final_model
    plan = SeedRun.read(result_dir, entry.path)
    if plan is None:
        raise UserError(f"{result_dir} has no plan.json to evaluate its final model in",
                        f"run `runner reproduce entries/{entry.name}` again")
    probe_dir = make_probe_inputs(staged.eval_dir, work_dir / "probe", result.seed)
    plan = replace(plan, image=image_id, data=RunData(Path(staged.train_dir), Path(staged.eval_dir), staged.digest),
                   result_dir=work_dir, scratch=work_dir / "scratch", probe_dir=probe_dir)
    used = [record["index"], *(e.get("index", -1) for e in t.evaluations),
            *(r.get("index", -1) for r in ((t.model_origin or {}).get("sensitivity") or []))]
    used += [int(p.name) for p in (result_dir / EVALUATIONS_DIR).glob("*") if p.name.isdigit()]
    reporter().print(f"[bold]evaluate[/] the final model ({record['weights']}): the run timed no model")
    try:
        final, sensitivity = evaluate_deferred(engine, plan, result_dir / "output", record,
                                               probe_subset(entry.task, labels, result.seed), max(used) + 1)
    except DeferredError as exc:
        raise UserError(f"{exc}; {result_dir.name} keeps its record",
                        f"run `runner reproduce entries/{entry.name}` again") from None
    added = []
    for folder in sorted((work_dir / EVALUATIONS_DIR).iterdir()):
        target = result_dir / EVALUATIONS_DIR / folder.name
        if target.exists():
            raise UserError(f"{target} exists already: the result folder was changed",
                            f"run `runner reproduce entries/{entry.name}` again")
        folder.rename(target)
        added.append(target)
    log = work_dir / "logs" / "evaluator.log"
    if log.is_file():
        log.replace(result_dir / "logs" / "evaluator-final-model.log")
    scored = [ScoredEvaluation(**e) for e in t.evaluations]
    scored_final = final_record(entry.task, final, result_dir, labels)
    assert scored_final is not None  # final_record returns None only for a None final, and final is a record
    kept = list((t.model_origin or {}).get("sensitivity") or [])
    origin, problems = model_origin(entry.task, scored, t.crossing, scored_final, [*kept, sensitivity], result_dir,
                                    labels, entry.inference.builder_seconds)
    assemble.final_evaluated(result, scored_final, origin, problems)
    return added


def _merge_earlier(old: Path, new: Path, kept: list[str]) -> None:
    """Carry the kept backends of the earlier phase (folder ``old``) into the new one's: their
    folders, and their events ahead of the new phase's in ``events.jsonl`` (each backend's
    windows are its own stamps, so they stay its own)."""
    for backend in kept:
        if (old / backend).is_dir():
            shutil.copytree(old / backend, new / backend)
    if not kept or not (old / "events.jsonl").is_file():
        return
    earlier = [e for e in read_events(old / "events.jsonl") if e.metadata.get("backend") in kept]
    now = read_events(new / "events.jsonl") if (new / "events.jsonl").is_file() else []
    write_events(new / "events.jsonl", [replace(e, seq=i) for i, e in enumerate(earlier + now)])


def swap_in(result_dir: Path, work_dir: Path, result: Result, inference: dict[str, BackendRun]) -> list[str]:
    """Put the new backends' files and records in place of theirs, keep every other backend's
    (``inference/``, ``logs/infer.log`` appended to), then write result.json. Returns the
    earlier backends kept."""
    kept = [name for name in result.inference if name not in inference]
    old = result_dir / f".inference-old-{work_dir.name}"
    if (result_dir / "inference").exists():
        _merge_earlier(result_dir / "inference", work_dir / "inference", kept)
        (result_dir / "inference").rename(old)
    (work_dir / "inference").rename(result_dir / "inference")
    (result_dir / "logs").mkdir(exist_ok=True)
    log = result_dir / "logs" / "infer.log"
    earlier_log = log.read_text(errors="replace") if log.is_file() and kept else ""
    new_log = (work_dir / "logs" / "infer.log").read_text(errors="replace")
    header = f"{earlier_log.rstrip()}\n--- runner reinfer {', '.join(inference)} ---\n" if earlier_log else ""
    log.write_text(header + new_log)
    merged = {**{name: result.inference[name] for name in kept}, **inference}
    assemble.inferred(result, merged, check_timed_model(result, merged, result_dir))
    result.write(result_dir)
    shutil.rmtree(old, ignore_errors=True)
    return kept


def reinfer(entry_path: str, *, result_dir: Path | None = None,
            backends: list[str] | None = None, threads: int | None = None,
            on_timed: Callable[[str, dict[str, BackendRun]], None] | None = None) -> ReinferenceOutcome:
    """Time ``backends`` (default: the manifest's) on ``result_dir`` (default: the entry's
    latest result), rewrite its inference section and re-sign it. ``on_timed(metric,
    inference)`` sees the new records as soon as the harness ran, before they are judged:
    a failed backend raises ``UserError`` after it, keeping the previous inference."""
    entry = load_entry(entry_path)
    backends = backends or list(entry.inference.backends)
    check_backends_available(backends)  # before any work: GPU backends need a GPU host
    if threads is not None and threads < 1:
        raise UserError("--threads must be at least 1", "pass --threads 1 or more")
    result_dir = Path(result_dir).resolve() if result_dir else latest_result(entry.name)
    require_intact(result_dir, ACTION)  # before a byte is written: an edit is never re-signed
    require_measured(result_dir, ACTION)  # ... nor a run this host did not measure, bundle or none
    result = _read_result(result_dir, entry)
    earlier = set(result.inference)
    plan = make_plan(entry_path, ReproduceOptions(backends=backends))  # the profile's limits
    if threads is not None:  # --threads: the harness's threads, instead of the manifest's
        plan = replace(plan, entry=replace(plan.entry, inference=replace(plan.entry.inference, threads=threads)))
    staged = _staged(entry, result)
    engine = get_engine()
    image_id = _image(engine, result, entry)

    reporter().print(f"[bold]infer[/] {entry.name} {', '.join(backends)} on {result_dir.name}")
    work_dir = Path(tempfile.mkdtemp(prefix=".infer-", dir=result_dir))
    added: list[Path] = []
    swapped = False
    try:
        labels = staged.load_eval_labels()  # once: the final model's evaluation and the timed model's
        added = _evaluate_final(engine, entry, result, result_dir, staged, labels, image_id, work_dir / "final-model")
        check_backends_available(backends, engine)
        # The new files go to the work folder (the plan's); the model stays in the result's output/.
        plan = plan.resolved(gpus=plan.limits.gpus, backends=backends, image=image_id,
                             data=RunData(Path(staged.train_dir), Path(staged.eval_dir), staged.digest)
                             ).for_run(result.seed, work_dir, work_dir / "scratch")
        model = TrainedModel(result_dir / "output", labels, whole_set=staged.conforming)
        inference = run_inference(engine, plan, model)
        if on_timed is not None:
            on_timed(entry.task.metric, inference)
        failed = {name: rec.error for name, rec in inference.items() if rec.error}
        if failed:
            log = result_dir / "logs" / "infer-failed.log"
            log.parent.mkdir(exist_ok=True)
            shutil.copyfile(work_dir / "logs" / "infer.log", log)
            raise UserError(
                "inference failed for " + "; ".join(f"{b}: {why}" for b, why in failed.items())
                + f". The previous inference of {result_dir.name} is kept",
                f"see {log}",
            )
        kept = swap_in(result_dir, work_dir, result, inference)
        swapped = True
    finally:
        if not swapped:  # the result keeps its record: the final model's answers leave again
            for folder in added:
                shutil.rmtree(folder, ignore_errors=True)
            (result_dir / "logs" / "evaluator-final-model.log").unlink(missing_ok=True)
        shutil.rmtree(work_dir, ignore_errors=True)
    reporter().print(f"rewrote {result_dir / 'result.json'} (inference) and {result_dir / 'inference'}")
    replaced = sorted(earlier & set(inference))
    reporter().print(replacement_note(replaced, kept, sorted(set(inference) - earlier)), highlight=False)
    sign_reinferred(result_dir, added)
    return ReinferenceOutcome(result_dir, entry.task.metric, inference, replaced, kept)


def sign_reinferred(result_dir: Path, added: list[Path]):
    """Sign a re-inferred result again (its bundle must be re-made, or verify would rightly
    refuse it), and bring the runner's record up to date with the new inference files: only
    if nothing but what re-inference wrote (``REWRITES``, ``REWRITTEN_FIELDS``, the final
    model's evaluations ``added``) changed since the run was measured."""
    return sign_folder(result_dir, again=ACTION, fields=REWRITTEN_FIELDS,
                       rewritten=(*REWRITES, *(Path(f).relative_to(result_dir).as_posix() for f in added)))


def replacement_note(replaced: list[str], kept: list[str], added: list[str]) -> str:
    """Exactly what the re-inference changed: whose figures were replaced, added and kept."""
    parts = []
    if replaced:
        parts.append(f"replaced the earlier figures of {', '.join(replaced)}")
    if added:
        parts.append(f"added {', '.join(added)}")
    parts.append(f"kept {', '.join(kept)} as they were" if kept else "kept no earlier backend")
    return "inference: " + "; ".join(parts)
