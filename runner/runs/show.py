"""One run as ``runner show`` presents it: the summary a person reads first, its curve, and
where its files are. Built from the run's typed result (``Result``), its ``curve.tsv`` and
its bundle's signature; ``to_dict`` is the same in JSON, with the full run id and paths.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from runner.dawnbench.tasks import format_task
from runner.dawnbench.tsv import FormatError, read_curve
from runner.errors import UserError
from runner.results.record import Result
from runner.results.view import CURVE_FILE
from runner.runs import RunRow

# The files a person opens first, in that order (docs/results.md lists every one).
FILES = (("result", "result.json"), ("curve", CURVE_FILE), ("events", "events.jsonl"), ("logs", "logs"),
         ("model", "output/model"), ("inference", "inference"), ("fingerprint", "fingerprint.json"),
         ("plan", "plan.json"), ("bundle", "bundle"))


@dataclass(frozen=True)
class CurvePoint:
    epoch: float
    seconds: float  # training time, evaluations excluded (DAWNBench's hours x 3600)
    score: float  # in the task's DAWNBench unit: percent, or F1 as a fraction


@dataclass
class RunView:
    row: RunRow
    result: Result
    location: str  # the folder, or the bundle's .tar.gz the run was read from
    bundle: bool  # read from a .tar.gz (its files are inside it)
    curve: list[CurvePoint] = field(default_factory=list)
    curve_problem: str | None = None
    files: dict[str, str] = field(default_factory=dict)  # name -> path (relative to the run folder)

    @property
    def percent(self) -> bool:
        return format_task(self.result.task.id).percent

    @property
    def threshold(self) -> float:
        """The threshold in the curve's unit."""
        return format_task(self.result.task.id).threshold

    def crossing(self) -> dict | None:
        training = self.result.training
        if not training or not training.reached or training.crossing is None:
            return None
        found = [e for e in training.evaluations if e.get("index") == training.crossing]
        return found[0] if found else None

    def to_dict(self) -> dict:
        r, training, cost = self.result, self.result.training, self.result.cost
        crossing = self.crossing()
        return {
            "run": self.row.to_dict(),
            "location": self.location,
            "bundle": self.bundle,
            "task": {"id": r.task.id, "metric": r.task.metric, "threshold": r.task.threshold},
            "incomplete_reason": r.incomplete_reason,
            "nonconforming_reasons": list(r.nonconforming_reasons),
            "crossing": None if crossing is None else {
                "index": crossing.get("index"), "epoch": crossing.get("epoch"),
                "score": (crossing.get("scores") or {}).get(r.task.metric)},
            "wall_seconds": training.wall_seconds if training else None,
            "cost": None if cost is None else {"training_usd": cost.training_usd, "profile": cost.profile,
                                                "usd_per_hour": cost.usd_per_hour},
            "inference": {name: {"passed_gate": b.passed_gate, "gate_reason": b.gate_reason,
                                 "score": b.score(r.task.metric), "latency_ms": b.latency_ms,
                                 "cost_per_10k_usd": b.cost_per_10k_usd}
                          for name, b in r.inference.items()},
            "curve": [{"epoch": p.epoch, "seconds": p.seconds, "score": p.score} for p in self.curve],
            "curve_problem": self.curve_problem,
            "files": dict(self.files),
        }


def view_run(folder: Path, result: Result, row: RunRow, location: str, bundle: bool) -> RunView:
    """The run in ``folder`` (a result folder, or a bundle opened there)."""
    view = RunView(row, result, location, bundle)
    column = format_task(result.task.id).metric_field
    path = Path(folder) / CURVE_FILE
    if path.is_file():
        try:
            view.curve = [CurvePoint(p.epoch, p.hours * 3600, p.scores[column]) for p in read_curve(path, (column,))]
        except (FormatError, UserError, OSError) as err:
            view.curve_problem = str(err)
    else:
        view.curve_problem = f"no {CURVE_FILE}"
    view.files = {name: rel for name, rel in FILES if (Path(folder) / rel).exists()}
    return view
