"""Generalization: do models optimised for time-to-accuracy generalize? DAWNBench's authors
scored the entries' models on new images collected by the original protocol and retrained
only the last layer of one entry's network on other tasks.

Two measures per run, both of the run's final model:

- **A second test set** (``Task.extra_sets``: QMNIST's lost MNIST digits, CIFAR-10.1,
  ImageNetV2; imported by ``runner data import NAME``): the runner's evaluator, locked down
  as for every evaluation and started from the run's own image, predicts the task's
  evaluation set and the second set in one request (``Evaluator(..., extra_inputs)``); the
  host scores both. The final model is the run's own bytes (its copy must have the sha256 the
  run recorded). Reported: both accuracies with Wilson's interval, the gap (original minus
  new) with Newcombe's interval for two independent proportions, and reference models'
  scores on both where the user names them (scores, or reference run folders evaluated the
  same way).
- **Transfer** (``runner.study.transfer``): a linear head on the final model's penultimate
  features for another staged task (``Task.transfer_tasks``, else any staged task with the
  same input shape), against the same head on a randomly initialised copy's features.

Runs that are not signed and intact, non-conforming runs and smoke runs are marked in every
table and figure (hollow markers, hatched bars, a note naming why), and the aggregate is of
the unmarked runs only; a second test set imported ``--unofficial`` (or a smoke study's
synthetic one) marks every figure on it.
"""

from __future__ import annotations

import secrets
import statistics
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from runner import data
from runner.data.extra_sets import default_extra, smoke_extra, staged_extra
from runner.data.store import StagedData
from runner.data.synthetic import smoke_data
from runner.errors import RunnerError, UserError
from runner.report import reporter
from runner.results.record import Result
from runner.safe_npy import load_npy
from runner.study.readable import read_run
from runner.study import transfer
from runner.study.common import (
    SavedStudy, StudyOutput, Table, custody_problem, fmt, run_entry, run_entry_copy, save_study, with_runs,
)
from runner.study.intervals import CONFIDENCE, newcombe, wilson
from runner.study.linear_head import PENALTY
from runner.study.plots import figure, save
from runner.tasks import TASKS, Task, get_task

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from runner.study.dispatch import StudyRequest

KIND = "generalization"
TRANSFER_TRAIN_ITEMS = 10_000  # the other task's training items the head is fitted on (drawn by the seed)
INTERVALS = {"accuracy": "Wilson score interval",
             "gap": "Newcombe's hybrid score interval for two independent proportions (method 10)",
             "transfer lead": "paired Wald interval from the discordant items (the same evaluation items)"}


@dataclass(frozen=True)
class Choices:
    """What the user chose for the study (``runner study generalization``'s flags)."""

    extra_set: str | None = None  # a second test set's name (None: the task's first)
    references: tuple[str, ...] = ()  # NAME=ORIG,NEW (percent) or a run folder
    transfer: bool = True
    transfer_task: str | None = None  # None: the task's declared one, else a staged one of the same shape
    transfer_items: int = TRANSFER_TRAIN_ITEMS


class RunProblem(RunnerError):
    """A run whose final model the study cannot score; the message says why."""

    default_fix = "reproduce the run again, or leave it out of the study"


# -- the data ----------------------------------------------------------------------------------

def original_set(task: Task, smoke: bool, scratch: Path) -> StagedData:
    return smoke_data(task.id, scratch / "smoke-data") if smoke else data.staged(task.id)


def second_set(task: Task, name: str | None, smoke: bool, scratch: Path):
    """(the declared set, its staged items): a smoke study's is synthetic, written in the
    set's official format and imported by its own code."""
    item = default_extra(task)
    if name is not None:
        found = [i for i in task.extra_sets if i.name == name]
        if not found:
            known = ", ".join(i.name for i in task.extra_sets) or "none"
            raise UserError(f"task {task.id} declares no second test set {name!r}", f"use one of: {known}")
        item = found[0]
    return item, (smoke_extra(task, item, scratch / "extra") if smoke else staged_extra(item.name))


def transfer_task(task: Task, named: str | None, smoke: bool) -> Task | None:
    """The task the head is trained for: the named one, else the task's declared ones, else
    any task with the same input shape, the first that is staged (or can be prepared)."""
    if named is not None:
        chosen = get_task(named)
        if chosen.input_shape != task.input_shape or chosen.inputs != task.inputs or not chosen.num_classes:
            raise UserError(f"{chosen.id}'s items ({chosen.input_shape}) are not {task.id}'s shape "
                            f"({task.input_shape})", "name a task with the same input shape, or pass --no-transfer")
        return chosen
    declared = [get_task(t) for t in task.transfer_tasks]
    candidates = declared or [t for t in TASKS.values() if t.id != task.id and t.input_shape is not None
                              and t.input_shape == task.input_shape and t.inputs == task.inputs and t.num_classes]
    for candidate in candidates:
        if smoke or candidate.id in data.PREPARABLE:
            return candidate
        try:
            data.staged(candidate.id)
            return candidate
        except UserError:
            continue
    return None


def transfer_data(task: Task, smoke: bool, items: int, seed: int, scratch: Path) -> dict:
    """The other task's items the features are read for: ``items`` of its training split drawn
    by ``seed`` (written to ``scratch``: images only, the labels stay here) and its whole
    evaluation split."""
    if smoke:
        staged = smoke_data(task.id, scratch / "transfer-smoke")
    else:
        try:
            staged = data.staged(task.id)
        except UserError:
            if task.id not in data.PREPARABLE:
                raise
            reporter().print(f"[bold]data[/] {task.id} is not staged yet: preparing it")
            staged = data.prepare(task.id)
    train_x = np.load(Path(staged.train_dir) / "images.npy", mmap_mode="r")
    train_y = np.load(Path(staged.train_dir) / "labels.npy")
    chosen = np.sort(np.random.default_rng(seed).permutation(len(train_x))[:items])
    folder = scratch / "transfer-train"
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "images.npy", np.ascontiguousarray(train_x[chosen]))
    eval_labels = staged.load_eval_labels()
    return {"task": task, "digest": staged.digest, "inputs": {"train": folder, "eval": Path(staged.eval_dir)},
            "counts": {"train": len(chosen), "eval": len(eval_labels)},
            "train_labels": train_y[chosen].astype(np.int64), "eval_labels": np.asarray(eval_labels, np.int64)}


# -- one run's final model ---------------------------------------------------------------------

def marks(folder: Path, result: Result) -> list[str]:
    """Why a run's figures are marked (empty: a signed, intact, conforming run)."""
    found = []
    if (problem := custody_problem(folder)) is not None:
        found.append(problem)
    if result.smoke:
        found.append("smoke run (synthetic data, never conforming)")
    elif not result.conforming:
        found.append("non-conforming: " + ("; ".join(map(str, result.nonconforming_reasons)) or "unknown"))
    if result.status != "complete":
        found.append(f"status {result.status}")
    return found


def _final_model(result: Result) -> dict:
    record = (result.training.final_model if result.training else None) or {}
    if not record.get("weights") or not record.get("sha256"):
        raise RunProblem("the run left no final model (no weights and sha256 in its record)")
    return record


def _score(task: Task, predictions_file: Path, labels) -> dict:
    try:
        predictions = load_npy(predictions_file)
        if len(predictions) != len(labels):
            raise ValueError(f"it answered {len(predictions)} items of {len(labels)}")
        scores = task.score(predictions, np.asarray(labels))
    except (ValueError, UserError) as exc:  # the answer of a container running the entry's builder
        raise RunProblem(f"the evaluator's answer {predictions_file.name} cannot be scored: {exc}") from None
    correct = int(round(scores[task.metric] * len(labels)))
    low, high = wilson(correct, len(labels))
    return {"score": scores[task.metric], "scores": scores, "correct": correct, "items": len(labels),
            "interval": [low, high]}


def evaluate_run(engine, folder: Path, task: Task, sets: dict, work: Path, transfer_with: dict | None) -> dict:
    """The run's final model scored on both sets by the runner's evaluator, and its transfer."""
    from runner.plan import RunData, SeedRun  # lazy: start-up (the plan and the evaluator, only for a study that evaluates)
    from runner.run.evaluator import Evaluator, EvaluatorError  # lazy: start-up (the plan and the evaluator, only for a study that evaluates)
    from runner.run.final_model import final_copy_name  # lazy: start-up (the plan and the evaluator, only for a study that evaluates)
    from runner.run.checkpoints import CheckpointError, copy_checkpoint  # lazy: start-up (the plan and the evaluator, only for a study that evaluates)
    from runner.study.flops import run_image  # lazy: start-up (the plan and the evaluator, only for a study that evaluates)

    result = read_run(folder)
    if result.task.id != task.id:
        raise UserError(f"{folder} is a run of task {result.task.id}, not {task.id}", "pass runs of one task")
    original, (name, extra) = sets["original"], sets["extra"]
    if not result.smoke and result.data is not None and result.data.digest != original.digest:
        raise UserError(f"{folder} was scored on {task.id} data {result.data.digest}, not the staged "
                        f"{original.digest}", f"stage the data the run used (`runner data` for {task.id})")
    if result.image is None:
        raise RunProblem("the run never started (its record names no image)")
    record = _final_model(result)
    image = run_image(engine, folder, result.entry.name, result.image.id, result.image.tag, result.smoke)
    with run_entry_copy(folder, result.entry.name) as entry_path:
        plan = SeedRun.read(folder, entry_path)
        if plan is None:
            raise RunProblem("the run has no plan.json to evaluate its final model in")
        run_dir = work / result.run_id
        plan = replace(plan, image=image.id, data=RunData(Path(original.train_dir), Path(original.eval_dir),
                                                          original.digest),
                       result_dir=run_dir, scratch=work / "scratch" / result.run_id, probe_dir=None)
        plan.checkpoints_dir.mkdir(parents=True, exist_ok=True)
        copy = plan.checkpoints_dir / final_copy_name(record["weights"])
        try:
            digest = copy_checkpoint(folder / "output", record["weights"], copy)
        except (CheckpointError, OSError) as exc:
            raise RunProblem(f"the final model cannot be copied: {exc}") from None
        if digest != record["sha256"]:
            raise RunProblem(f"output/{record['weights']} has sha256 {digest[:16]}, not the {record['sha256'][:16]} "
                             "the run recorded: not the model the run produced")
        evaluator = Evaluator(engine, plan, {name: Path(extra.eval_dir)})
        try:
            # No entry runs on a clock here: the evaluator is never frozen and gets the engine's
            # default CPU weight from its start (the lowest would starve it on a busy host).
            evaluator.prestart()
            evaluator.stay_awake()
            answer = evaluator.evaluate(0, copy.name)
        except EvaluatorError as exc:
            raise RunProblem(f"the evaluator could not evaluate the final model: {exc}") from None
        finally:
            evaluator.close()
        scored = {"original": _score(task, plan.evaluations_dir / answer.files["clean"], original.load_eval_labels()),
                  "new": _score(task, plan.evaluations_dir / answer.files[name], extra.load_eval_labels())}
        framework = plan.entry.framework["name"]
        limits = plan.limits
        recorded = (record.get("scores") or {}).get(task.metric)
        gap, low, high = newcombe(scored["original"]["correct"], scored["original"]["items"],
                                  scored["new"]["correct"], scored["new"]["items"])
        out = {**scored, "gap": {"points": gap, "interval": [low, high]}, "final_model_sha256": digest,
               "recorded_original_score": recorded, "image": {"id": image.id, "rebuilt": image.rebuilt},
               "builder_seconds": answer.builder_seconds}
        if transfer_with is not None:
            out["transfer"] = _transfer(engine, image, plan.entry.inference.builder, framework, copy, limits,
                                        transfer_with, run_dir / "logs" / "features.log")
    return out


def _transfer(engine, image, builder: str, framework: str, weights: Path, limits, given: dict, log: Path) -> dict:
    try:
        found = transfer.extract(engine, image, builder=builder, framework=framework, weights=weights,
                                 inputs=given["inputs"], counts=given["counts"], seed=given["seed"],
                                 cpus=limits.cpus, memory=limits.memory, log_path=log)
    except UserError as exc:
        return {"problem": str(exc)}
    task = given["task"]
    return {**transfer.heads(found["features"], given["train_labels"], given["eval_labels"], task.num_classes),
            **found["record"]}


def _engine():
    from runner.engine import get_engine  # lazy: start-up (the engine, only when a study evaluates)

    return get_engine()


# -- references --------------------------------------------------------------------------------

def parse_reference(text: str) -> dict | None:
    """``NAME=ORIG,NEW`` (accuracies in percent) as a record; None when ``text`` is not of that
    form (then it names a run folder)."""
    if "=" not in text:
        return None
    name, _, scores = text.rpartition("=")
    try:
        values = [float(v) / 100 for v in scores.split(",")]
    except ValueError:
        values = []
    if not name.strip() or len(values) != 2 or any(not 0 <= v <= 1 for v in values):
        raise UserError(f"--reference {text!r} is not NAME=ORIG,NEW",
                        "give a name and the accuracies in percent on the original and the new set, e.g. "
                        "--reference ResNet-50=76.1,63.3, or a reference run folder")
    original, new = values
    return {"name": name.strip(), "source": "given", "original": {"score": original}, "new": {"score": new},
            "gap": {"points": original - new, "interval": None},
            "marks": ["given by the user, not measured here"]}


def reference(text: str, task: Task, smoke: bool) -> dict:
    """A ``--reference``: scores the user gives, or a run folder of the task to evaluate."""
    given = parse_reference(text)
    if given is not None:
        return given
    folder = Path(text)
    if not (folder / "result.json").is_file():
        raise UserError(f"--reference {text}: not NAME=ORIG,NEW and not a run folder (no result.json)",
                        "give NAME=ORIG,NEW (percent) or a run folder made by `runner reproduce`")
    result = read_run(folder)
    if result.task.id != task.id or result.smoke != smoke:
        kind = "a smoke" if result.smoke else "a full"
        raise UserError(f"--reference {text}: {kind} run of {result.task.id}, for a study of "
                        f"{'smoke' if smoke else 'full'} runs of {task.id}", "pass a reference run of the same kind")
    return {"name": f"{result.entry.name} {result.run_id}", "source": "run", "folder": str(folder.resolve()),
            "run_id": result.run_id}


# -- the study ---------------------------------------------------------------------------------

def analyse(folders: list[Path], choices: Choices, work: Path) -> dict:
    results = [read_run(f) for f in folders]
    task = get_task(results[0].task.id)
    if task.inputs != "images":
        raise UserError(f"the generalization study scores image models; {task.id} has no image input",
                        "run it on an image task's entry")
    smoke = results[0].smoke
    if any(r.smoke != smoke for r in results):
        raise UserError("the runs mix smoke and full runs", "pass runs of one kind")
    wanted = [reference(text, task, smoke) for text in choices.references]  # refused before any work
    original = original_set(task, smoke, work)
    item, extra = second_set(task, choices.extra_set, smoke, work)
    sets = {"original": original, "extra": (item.name, extra)}
    seed = secrets.randbelow(2**31)
    other = transfer_task(task, choices.transfer_task, smoke) if choices.transfer else None
    given = None
    if other is not None:
        given = {**transfer_data(other, smoke, choices.transfer_items, seed, work), "seed": seed}
    engine = _engine()
    runs = []
    for folder, result in zip(folders, results):
        reporter().print(f"[bold]evaluate[/] {result.run_id}'s final model on {task.id} and {item.name}")
        row: dict[str, Any] = {"run_id": result.run_id, "seed": result.seed, "status": result.status,
                               "marks": marks(folder, result)}
        try:
            row.update(evaluate_run(engine, folder, task, sets, work / "runs", given))
        except RunProblem as exc:
            row["problem"] = str(exc)
        runs.append(row)
    references = []
    for ref in wanted:
        if ref["source"] == "given":
            references.append(ref)
            continue
        folder = Path(ref["folder"])
        row = {**ref, "marks": marks(folder, read_run(folder))}
        try:
            row.update(evaluate_run(engine, folder, task, sets, work / "references", None))
        except RunProblem as exc:
            row["problem"] = str(exc)
        references.append(row)
    counted = [r for r in runs if not r["marks"] and "problem" not in r]
    unofficial = not extra.conforming
    return {
        "kind": KIND, "entry": results[0].entry.name, "task": task.id, "metric": task.metric, "smoke": smoke,
        "confidence": CONFIDENCE, "intervals": INTERVALS,
        "original_set": {"name": task.id, "items": original.counts.get("eval"), "digest": original.digest},
        "second_set": {"name": item.name, "description": item.description, "items": extra.counts.get("eval"),
                       "digest": extra.digest, "official": not unofficial, "source": extra.source,
                       "files": extra.details.get("files", {}), "digests": extra.details.get("digests"),
                       "digest_source": item.digest_source},
        "runs": runs,
        "references": references,
        "counted_runs": [r["run_id"] for r in counted],
        "median_gap_points": statistics.median([r["gap"]["points"] for r in counted]) if counted else None,
        "transfer": None if given is None else {
            "task": given["task"].id, "data_digest": given["digest"], "train_items": given["counts"]["train"],
            "eval_items": given["counts"]["eval"], "random_seed": seed,
            "head": f"multinomial logistic regression on standardised features, L2 penalty {PENALTY:g}, "
                    "L-BFGS (scipy)"},
        "transfer_skipped": None if given is not None else (
            "--no-transfer" if not choices.transfer
            else f"no staged task with {task.id}'s input shape {task.input_shape} to transfer to"),
    }


# -- the report --------------------------------------------------------------------------------

def _pct(value) -> str:
    return fmt(None if value is None else value * 100, ".2f")


def _interval(bounds) -> str:
    return "--" if not bounds else f"[{bounds[0] * 100:.2f}, {bounds[1] * 100:.2f}]"


def _label(row: dict) -> str:
    return row.get("name") or row["run_id"]


def plot_scores(summary: dict, path: Path) -> str:
    fig, (left, right) = figure(2, width=5.6)
    rows = [("run", r) for r in summary["runs"] if "problem" not in r] + \
           [("reference", r) for r in summary["references"] if "problem" not in r]
    for kind, row in rows:
        marked = bool(row.get("marks"))
        original, new = row["original"], row["new"]
        x, y = original["score"] * 100, new["score"] * 100
        xerr = yerr = None
        if original.get("interval"):
            xerr = [[x - original["interval"][0] * 100], [original["interval"][1] * 100 - x]]
            yerr = [[y - new["interval"][0] * 100], [new["interval"][1] * 100 - y]]
        marker = "o" if kind == "run" else ("s" if row.get("source") == "run" else "D")
        label = _label(row) + (" *" if marked else "")
        shown = left.errorbar([x], [y], xerr=xerr, yerr=yerr, fmt=marker, capsize=3, label=label,
                              mfc="none" if marked else None)
        colour = shown[0].get_color()
        gap = row["gap"]
        right.errorbar([gap["points"] * 100], [label], fmt=marker, color=colour, mfc="none" if marked else colour,
                       xerr=None if not gap["interval"] else [[(gap["points"] - gap["interval"][0]) * 100],
                                                              [(gap["interval"][1] - gap["points"]) * 100]],
                       capsize=3)
    low, high = left.get_xlim()
    span = (min(low, left.get_ylim()[0]), max(high, left.get_ylim()[1]))
    left.plot(span, span, color="grey", ls="--", lw=1, label="no gap")
    second = summary["second_set"]["name"] + ("" if summary["second_set"]["official"] else " (unofficial)")
    left.set_xlabel(f"{summary['task']} test set, {summary['metric']} (%)")
    left.set_ylabel(f"{second}, {summary['metric']} (%)")
    left.set_title("final models on both test sets")
    left.legend(fontsize=7, title="* marked: see notes", title_fontsize=7)
    right.axvline(0, color="grey", lw=1)
    right.set_xlabel(f"gap: original - {second} (points, {summary['confidence']:.0%} interval)")
    right.set_title("generalization gap")
    return save(fig, path)


def plot_transfer(summary: dict, path: Path) -> str | None:
    rows = [r for r in summary["runs"] if isinstance(r.get("transfer"), dict) and "problem" not in r["transfer"]]
    if not rows:
        return None
    fig, (ax,) = figure(width=max(5.2, 1.6 * len(rows) + 2))
    width = 0.38
    for i, row in enumerate(rows):
        marked = bool(row["marks"])
        for offset, model, colour in ((-width / 2, "trained", "tab:blue"), (width / 2, "random", "tab:grey")):
            head = row["transfer"][model]
            accuracy = head["accuracy"] * 100
            err = [[accuracy - head["interval"][0] * 100], [head["interval"][1] * 100 - accuracy]]
            ax.bar([i + offset], [accuracy], width, yerr=err, capsize=3, color=colour, hatch="//" if marked else None,
                   edgecolor="black", label=(f"{model} features" if i == 0 else None))
    ax.set_xticks(range(len(rows)), [_label(r) + (" *" if r["marks"] else "") for r in rows], fontsize=7)
    ax.set_ylabel(f"{summary['transfer']['task']} accuracy of a linear head (%)")
    ax.set_ylim(0, 115)  # room for the legend above the bars
    ax.set_xlim(-0.8, len(rows) - 0.2)
    ax.set_title("transfer: trained against randomly initialised features")
    ax.legend(fontsize=7, title="hatched *: marked run", title_fontsize=7, loc="upper right", ncols=2)
    return save(fig, path)


def present(saved: SavedStudy) -> StudyOutput:
    """Its row's report: the saved study's summary as its tables, plots and notes."""
    folder, summary = saved.folder, saved.summary
    second = summary["second_set"]
    new = second["name"] + ("" if second["official"] else " (unofficial)")
    ci = f"{summary['confidence']:.0%} CI"
    headers = ["model", "kind", f"{summary['task']} %", ci, f"{new} %", ci, "gap (points)", ci, "marked"]
    rows = []
    for kind, row in [("run", r) for r in summary["runs"]] + [("reference", r) for r in summary["references"]]:
        if "problem" in row:
            rows.append([_label(row), kind, "--", "--", "--", "--", "--", "--", f"not scored: {row['problem']}"])
            continue
        gap = row["gap"]
        rows.append([_label(row), kind if kind == "run" else f"reference ({row['source']})",
                     _pct(row["original"]["score"]), _interval(row["original"].get("interval")),
                     _pct(row["new"]["score"]), _interval(row["new"].get("interval")),
                     fmt(gap["points"] * 100, "+.2f"), _interval(gap["interval"]), "; ".join(row["marks"]) or "no"])
    tables = [Table(f"final models on {summary['task']}'s test set and {new}", headers, rows)]
    plots = [(plot_scores(summary, folder / "generalization.png"),
              f"final models on both test sets ({ci}: Wilson) and the gap ({ci}: Newcombe); * marked, see notes")]
    if summary["smoke"]:
        notes = [f"second test set: a synthetic stand-in written in {second['name']}'s official format and imported "
                 f"by its own code, {second['items']:,} items"]
    else:
        notes = [f"second test set: {second['description']}, {second['items']:,} items; {second['digests']}"
                 + ("" if second["official"] else "; imported --unofficial: no figure on it is official")]
    notes += [f"{r['run_id']} is marked: {'; '.join(r['marks'])}" for r in summary["runs"] if r["marks"]]
    notes.append(f"counted (signed, intact, conforming): {len(summary['counted_runs'])} of {len(summary['runs'])}; "
                 f"median gap {fmt(summary['median_gap_points'] and summary['median_gap_points'] * 100, '+.2f')} points")
    transfer_info = summary["transfer"]
    if transfer_info is None:
        notes.append(f"transfer not measured: {summary['transfer_skipped']}")
    else:
        trows = []
        for row in summary["runs"]:
            t = row.get("transfer")
            if not isinstance(t, dict):
                continue
            if "problem" in t:
                trows.append([row["run_id"], "--", "--", "--", "--", "--", "--", f"not measured: {t['problem']}"])
                continue
            trows.append([row["run_id"], _pct(t["trained"]["accuracy"]), _interval(t["trained"]["interval"]),
                          _pct(t["random"]["accuracy"]), _interval(t["random"]["interval"]),
                          fmt(t["lead"]["points"] * 100, "+.2f"), _interval(t["lead"]["interval"]),
                          "; ".join(row["marks"]) or "no"])
        if trows:
            tables.append(Table(f"transfer to {transfer_info['task']}: a linear head on the final model's penultimate "
                                f"features against a randomly initialised copy's",
                                ["run", "trained %", ci, "random %", ci, "lead (points)", ci, "marked"], trows))
        name = plot_transfer(summary, folder / "transfer.png")
        if name:
            plots.append((name, f"{transfer_info['task']} accuracy of a linear head on trained and random features "
                                f"({ci}: Wilson); hatched: marked runs"))
        notes.append(f"transfer: {transfer_info['head']}, on {transfer_info['train_items']:,} of "
                     f"{transfer_info['task']}'s training items and all {transfer_info['eval_items']:,} of its "
                     f"evaluation items; the features are the input of the model's last layer, computed in the run's "
                     f"own image (python3 -m harness features), the random copy built by the entry's builder from "
                     f"seed {transfer_info['random_seed']}: the entry's own figures, read with bounds")
    if summary["smoke"]:
        notes.append("a smoke study: synthetic data and a truncated epoch, so the figures are nominal")
    return StudyOutput(KIND, summary["entry"], folder, summary, plots=plots, tables=tables, notes=notes)


def study(folders: list[Path], choices: Choices = Choices()) -> SavedStudy:
    with tempfile.TemporaryDirectory(prefix="runner-study-generalization-") as tmp:
        work = Path(tmp)
        summary = analyse(folders, choices, work)
        saved = save_study(KIND, folders, summary)
        for group in ("runs", "references"):  # the evaluator's answers and logs, to check the figures by
            for row in summary[group]:
                source = work / group / str(row.get("run_id"))
                for part in ("evaluations", "logs"):
                    if row.get("run_id") and (source / part).is_dir():
                        _copy_tree(source / part, saved.folder / "evaluations" / group / row["run_id"] / part)
    return saved


def _copy_tree(source: Path, target: Path) -> None:
    import shutil  # lazy: start-up (only when the study keeps its answers)

    shutil.copytree(source, target, dirs_exist_ok=True)


def run(entry_path: str, runs: int, opts, choices: Choices = Choices(), slurm=None) -> SavedStudy:
    # seed=None: the runner draws the seeds, as for any reproduction.
    folders = run_entry(entry_path, with_runs(opts, runs, seed=None), slurm)
    return study(folders, choices)


def choices_of(arguments: Mapping[str, Any]) -> Choices:
    """What ``runner study generalization``'s own flags chose (absent: the defaults)."""
    return Choices(extra_set=arguments.get("extra_set"), references=tuple(arguments.get("reference") or ()),
                   transfer=not arguments.get("no_transfer", False), transfer_task=arguments.get("transfer_task"),
                   transfer_items=arguments.get("transfer_items") or TRANSFER_TRAIN_ITEMS)


def new_runs(request: StudyRequest) -> SavedStudy:
    """Its row's run (runner.study.registry): new runs (one by default), each final model scored."""
    return run(request.entry, request.new_runs, request.options, choices_of(request.arguments), slurm=request.slurm)


def given_runs(request: StudyRequest, runs: Callable[[], list[Path]]) -> SavedStudy:
    """Its row's ``--from-runs`` reader."""
    return study(runs(), choices_of(request.arguments))
