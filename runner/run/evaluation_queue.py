"""The checkpoints the entry asks to have evaluated: each copied and hashed in its frozen
window (up to ``MAX_EVALUATIONS``), then, after the container exited, handed in order to the
runner's evaluator, up to the first that meets the threshold (every one with
``--full-curve``); the final model and the sensitivity checks after them. Nothing here runs
on the entry's clock but the copy."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from runner.plan import EVALUATIONS_DIR
from runner.run import final_model
from runner.run.checkpoints import CheckpointError, copy_checkpoint
from runner.run.evaluator import EvaluatorError
from runner.score.evaluations import primary_score, score_file

if TYPE_CHECKING:
    from runner.events import Event
    from runner.plan import SeedRun
    from runner.run.evaluator import Evaluator
    from runner.run.progress import TrainingProgress

MAX_EVALUATIONS = 100  # each freezes the clock: an entry may not buy unlimited free time


@dataclass
class Pending:
    """A checkpoint copied in its frozen window, to be evaluated after the container exits."""

    index: int
    name: str  # the runner's copy under checkpoints/
    freeze: Event
    thaw: Event  # completed with the evaluation's fields


@dataclass(frozen=True)
class Copied:
    """A checkpoint's copy: its name under checkpoints/, its sha256, or why it failed."""

    name: str
    digest: str | None
    problem: str | None


class EvaluationQueue:
    """The requests admitted, their copies, and the evaluator's answers (``notes`` receives
    what the runner refused)."""

    def __init__(self, evaluator: Evaluator, plan: SeedRun, labels, progress: TrainingProgress, notes: list[str]):
        self.evaluator, self.plan, self.task, self.labels = evaluator, plan, plan.entry.task, labels
        self.progress, self.notes = progress, notes
        self.requests = 0  # evaluation requests seen, those past the limit included
        self.pending: list[Pending] = []  # checkpoints copied, evaluated after the container exits
        self.crossed = False  # an evaluation met the threshold: the clock has stopped
        self.after_crossing = 0  # requests not evaluated since (without full_curve)
        self.crossing_checkpoint: tuple[int, str] | None = None  # (index, the runner's copy)
        self.final_checkpoint: str | None = None  # the runner's copy of the final model

    def admit(self) -> int | None:
        """The next request's index, or None past ``MAX_EVALUATIONS`` (said once in the notes)."""
        index = self.requests
        self.requests += 1
        if index < MAX_EVALUATIONS:
            return index
        if index == MAX_EVALUATIONS:
            self.notes.append(f"evaluation requests beyond {MAX_EVALUATIONS} were ignored")
        return None

    def copy(self, index: int, checkpoint: object) -> Copied:
        """Copy and hash the entry's checkpoint (``checkpoint``: the request's field, as the
        entry wrote it) under checkpoints/; a bad name or a failed copy is a ``problem``."""
        name = f"{index}{Path(str(checkpoint)).suffix[:16]}"
        try:
            self.plan.checkpoints_dir.mkdir(exist_ok=True)
            return Copied(name, copy_checkpoint(self.plan.output_dir, checkpoint, self.plan.checkpoints_dir / name),
                          None)
        except (CheckpointError, OSError) as exc:
            return Copied(name, None, str(exc))

    def predictions(self, index: int) -> str:
        """Where evaluation ``index``'s clean predictions will be, under the result folder."""
        suffix = "json" if self.task.inputs == "questions" else "npy"
        return f"{EVALUATIONS_DIR}/{index}/clean.{suffix}"

    def hold(self, job: Pending) -> None:
        self.pending.append(job)

    def evaluate_pending(self, interrupted: bool = False) -> list[Event]:
        """Evaluate the checkpoints copied during training, in the order they were asked for,
        up to the first that meets the threshold (all of them with ``--full-curve``). Each
        result completes its ``eval_thaw`` event. Returns the events of the windows after the
        crossing, which the caller drops (the entry's requests stay in the stream); their
        copies are deleted and they are counted in ``after_crossing``."""
        dropped: list[Event] = []
        for job in self.pending:
            if interrupted:
                job.thaw.metadata["problem"] = "not evaluated: the run was interrupted"
                continue
            if self.crossed and not self.plan.options.full_curve:
                self.after_crossing += 1
                dropped += [job.freeze, job.thaw]
                (self.plan.checkpoints_dir / job.name).unlink(missing_ok=True)
                continue
            fields, score, meets = self.evaluate_checkpoint(job.index, job.name)
            job.thaw.metadata.update(fields)
            if meets and not self.crossed:
                self.crossing_checkpoint = (job.index, job.name)
            self.crossed = self.crossed or meets
            self.progress.update(score=score, scored=True)
        self.pending = []
        return dropped

    def evaluate_checkpoint(self, index: int, name: str) -> tuple[dict, float | None, bool]:
        """(the eval_thaw fields, the primary score, whether it meets the threshold) for the
        runner's copy ``name``: the clean set and the probe's items in one request, so the
        model the probe scores is the one the clean set scored (a model's first forward pass
        may do anything, once)."""
        answer, problem, score, meets = None, None, None, False
        try:
            answer = self.evaluator.evaluate(index, name, probe_items=self.probe_subset())
            _, scores, problem = score_file(self.task, self.plan.result_dir,
                                            f"{EVALUATIONS_DIR}/{answer.files['clean']}", self.labels)
            score = primary_score(self.task, scores)
            meets = problem is None and score is not None and self.task.meets(score)
        except EvaluatorError as exc:
            problem = str(exc)
        fields = {"problem": problem, "probe_predictions": None, "builder_seconds": None,
                  "predict_seconds": None, "provenance": None}
        if answer is not None:
            fields.update(final_model.answer_fields(answer, self.probe_subset()))
        return fields, score, meets

    def probe_subset(self) -> tuple[int, int] | None:
        """(items, seed) of the probe's images a request predicts (a smaller set: all of them);
        None: every item (questions)."""
        return final_model.probe_subset(self.task, self.labels, self.plan.seed)

    def evaluate_final(self) -> dict | None:
        """The final model's record (not part of TTA): copied and hashed, and evaluated
        unless this run times no model (``runner.run.final_model``)."""
        record, self.final_checkpoint = final_model.evaluate_final(
            self.evaluator, self.plan, self.requests, self.probe_subset(), evaluate=self.plan.options.infer)
        return record

    def evaluate_sensitivity(self) -> list[dict]:
        """The crossing checkpoint and the evaluated final model once more, each with its
        tensors permuted (after training: nothing here is on the clock)."""
        jobs: list[tuple[str, int | None, str]] = []
        if self.crossing_checkpoint is not None:
            jobs.append(("crossing", *self.crossing_checkpoint))
        if self.final_checkpoint:
            jobs.append(("final", None, self.final_checkpoint))
        return final_model.evaluate_sensitivity(self.evaluator, self.plan, jobs, self.requests + 1)

    def crossing_note(self) -> str | None:
        """The note on the requests after the crossing that were not evaluated, if any."""
        if not self.after_crossing:
            return None
        return (f"{self.after_crossing} evaluation request(s) after the crossing were not "
                "evaluated: the clock had stopped (--full-curve evaluates every checkpoint)")
