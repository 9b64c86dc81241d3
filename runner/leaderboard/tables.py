"""DAWNBench's leaderboard tables, with each claim beside its reproduction.

Four objectives per task (training time, training cost, inference latency, inference
cost per 10,000 items) for CIFAR10, ImageNet, SQuAD and the offline tasks MNIST and
Fashion-MNIST. A row is a claim (an imported DAWNBench submission, or an entry's own
``claimed`` figure) and the reproduction paired with it, if any: an entry names the
submissions it reproduces (training and inference files) in ``claimed.dawnbench``. Rows rank by the claimed figure as
DAWNBench ranked them; rows without a claim follow, by the reproduced figure.

A reproduced figure is never one run alone, and only runs that *count* make it (the verdict
of ``runner verify``, ``runner.verify.verdict``): the median of the counting runs, shown
with their number, min–max and coefficient of variation (``Spread``). When none counts the
row shows no figure, only why its newest run does not count: a smoke run, a variant or a
run that fails a check is never a headline. A DAWNBench claim's figure is made of the runs
on the host class its reproducing entry names (the runs held against the claim); the
entry's runs on other hosts are rows of their own. An entry's runs are grouped per profile,
and each group is held against the claim ``runner.claims.applicable_claim`` gives it: a
group whose host does not meet that claim's profile shows the claim but no ratio, as
``runner reproduce`` says "not compared".
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from runner.dawnbench.claims import Claim
from runner.dawnbench.tasks import FORMAT_TASKS, FormatTask
from runner.leaderboard import formats
from runner.leaderboard.reproductions import Reproduction


@dataclass(frozen=True)
class Objective:
    id: str
    title: str
    kind: str  # the claim kind it ranks: train or inference
    claimed: Callable[[Claim], float | None]
    reproduced: Callable[[Reproduction], float | None]
    entry_claim: Callable[[Reproduction], float | None]  # the entry's own claimed figure
    show: Callable[[float | None], str]
    column: str  # DAWNBench's header for the figure; {threshold} becomes e.g. "94%"
    show_run: Callable[[float | None], str] | None = None  # a measured figure, if shown otherwise than a claim


def _fastest(r: Reproduction):
    gated = r.record.gated_backends()
    return gated[0] if gated else None


def _repro_latency(r: Reproduction) -> float | None:
    b = _fastest(r)
    return None if b is None else b.mean_ms


def _repro_inference_cost(r: Reproduction) -> float | None:
    b = _fastest(r)
    return None if b is None else b.cost_per_10k_usd


def _repro_tta(r: Reproduction) -> float | None:
    return r.record.tta_seconds if r.record.reached else None


def _repro_train_cost(r: Reproduction) -> float | None:
    return r.record.training_usd if r.record.reached else None


def _entry_tta(r: Reproduction) -> float | None:
    return r.claim.tta_seconds if r.claim else None  # the claim runner.claims says applies


def _entry_train_cost(r: Reproduction) -> float | None:
    tta, price = _entry_tta(r), r.record.usd_per_hour
    return None if tta is None or price is None else tta / 3600 * price


def _entry_latency(r: Reproduction) -> float | None:
    return r.claim.latency_ms if r.claim else None


OBJECTIVES: tuple[Objective, ...] = (
    Objective("train-time", "Training Time", "train", lambda c: c.tta_seconds, _repro_tta, _entry_tta,
              formats.duration, "Time to {threshold} Accuracy", formats.run_duration),
    Objective("train-cost", "Training Cost", "train", lambda c: c.cost_usd, _repro_train_cost, _entry_train_cost,
              formats.dollars, "Cost (USD)"),
    Objective("inference-latency", "Inference Latency", "inference", lambda c: c.latency_ms, _repro_latency,
              _entry_latency, formats.milliseconds, "1-example Latency (milliseconds)"),
    Objective("inference-cost", "Inference Cost", "inference", lambda c: c.cost_per_10k_usd, _repro_inference_cost,
              lambda r: None, formats.dollars, "Cost for 10,000 items (USD)"),
)


@dataclass(frozen=True)
class Spread:
    """The counting runs behind a reproduced figure (never one run shown as if alone)."""

    runs: int
    low: float
    high: float
    cv: float | None  # sample standard deviation / mean; None for one run
    resolution: float | None = None  # the median TTA resolution of the runs (training time only)

    @classmethod
    def of(cls, values: list[float], resolutions: list[float] | None = None) -> "Spread":
        mean = statistics.fmean(values)
        cv = statistics.stdev(values) / mean if len(values) > 1 and mean else None
        return cls(len(values), min(values), max(values), cv,
                   statistics.median(resolutions) if resolutions else None)


@dataclass
class Row:
    rank: int
    claimed: float | None
    reproduced: float | None
    claim: Claim | None
    reproduction: Reproduction | None
    model: str
    team: str
    hardware: str
    framework: str
    date: str
    spread: Spread | None = None  # the counting runs the reproduced median is of; None: none counts
    not_compared: str = ""  # why the runs are not held against the claim shown ("" when they are)
    ledger: str = ""  # "3 of 7 runs of this entry with key 1a2b3c4d": the runs read against the key's ledger
    rules: str = ""  # the task's rules versions the row's runs were made under ("mnist rules v1")

    @property
    def ratio(self) -> float | None:
        """reproduced / claimed: above 1 the reproduction took longer or cost more."""
        if self.claimed in (None, 0) or self.reproduced is None or self.not_compared:
            return None
        ratio = self.reproduced / self.claimed
        return ratio if math.isfinite(ratio) else None  # an overflow is no figure (and not JSON)


@dataclass
class Table:
    task: FormatTask
    objective: Objective
    rows: list[Row] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.task.task_id}-{self.objective.id}"

    @property
    def title(self) -> str:
        return f"{self.task.folder} {self.objective.title}"

    @property
    def column(self) -> str:
        ft = self.task
        threshold = f"{ft.threshold:g}" + ("%" if ft.percent else " F1")
        return self.objective.column.format(threshold=threshold)

    @property
    def criterion(self) -> str:
        ft = self.task
        unit = f"{ft.threshold:g}" + ("%" if ft.percent else "")
        what = {"top1Accuracy": "top-1 accuracy", "top5Accuracy": "top-5 accuracy", "f1Score": "F1"}[ft.metric_field]
        return f"{what} ≥ {unit}"

    def show(self, value: float | None) -> str:
        return self.objective.show(value)

    def show_reproduced(self, value: float | None) -> str:
        return (self.objective.show_run or self.objective.show)(value)

    def show_spread(self, spread: Spread) -> str:
        """"median of 3 runs, 5.91 s–6.40 s, CoV 4.1%, resolution 4.9 s"."""
        runs = f"median of {spread.runs} runs" if spread.runs > 1 else "1 run"
        text = f"{runs}, {self.show_reproduced(spread.low)}–{self.show_reproduced(spread.high)}"
        text += "" if spread.cv is None else f", CoV {100 * spread.cv:.1f}%"
        return text + ("" if spread.resolution is None else f", resolution {spread.resolution:.1f} s")


def best_reproduction(candidates: list[Reproduction]) -> Reproduction | None:
    """A counting run first, then the newest."""
    if not candidates:
        return None
    return max(candidates, key=lambda r: (r.counts, r.record.run_id))


def aggregate(runs: list[Reproduction], objective: Objective) -> tuple[Reproduction | None, float | None, Spread | None]:
    """The run a row links to, its reproduced figure and the spread behind it: the median of
    the counting runs' figures. When none counts: the newest run (for why it does not count)
    and no figure."""
    counting = [(r, v) for r in runs if r.counts and (v := objective.reproduced(r)) is not None]
    if not counting:
        return best_reproduction(runs), None, None
    values = [v for _, v in counting]
    steps = [s for r, _ in counting if (s := r.record.tta_resolution_seconds) is not None]
    return (best_reproduction([r for r, _ in counting]), statistics.median(values),
            Spread.of(values, steps if objective.id == "train-time" else None))


def ledger_note(runs: list[Reproduction]) -> str:
    """"3 of 7 runs of this entry with key 1a2b3c4d" for each entry and key among ``runs``
    whose signed results carry their place in the key's ledger (the largest count they
    signed): a figure of a few runs is read against every run of the entry the key made."""
    counts: dict[tuple[str, str], list[int]] = {}
    for r in runs:
        place = r.record.ledger or {}
        if (r.signer_keyid and not r.record.smoke and place.get("key_id") == r.signer_keyid
                and isinstance(place.get("entry_runs"), int)):
            counts.setdefault((r.record.entry, r.signer_keyid), []).append(place["entry_runs"])
    entries = {entry for entry, _ in counts}
    return "; ".join(f"{len(made)} of {max(made)} run{'s' if max(made) != 1 else ''} of "
                     f"{'this entry' if len(entries) == 1 else entry} with key {key[:8]}"
                     for (entry, key), made in sorted(counts.items()))


def rules_note(runs: list[Reproduction]) -> str:
    """"mnist rules v1" (or "mnist rules v1, v2"): the rules versions the runs behind a figure
    were made under and are judged by (those that count, else all)."""
    shown = [r for r in runs if r.counts] or runs
    if not shown:
        return ""
    versions = sorted({r.record.rules_version for r in shown}, key=lambda v: (len(v), v))
    return f"{shown[0].record.task} rules " + ", ".join(f"v{v}" for v in versions)


def _claim_row(claim: Claim, objective: Objective, runs: list[Reproduction]) -> Row:
    repro, value, spread = aggregate(runs, objective)
    return Row(0, objective.claimed(claim), value, claim, repro,
               claim.model, claim.team, claim.hardware, claim.framework, claim.date, spread,
               ledger=ledger_note(runs), rules=rules_note(runs))


def _entry_row(runs: list[Reproduction], objective: Objective) -> Row:
    repro, value, spread = aggregate(runs, objective)
    assert repro is not None  # an entry's row is of its runs, one at least (aggregate picks one of any)
    rec = repro.record
    claimed = objective.entry_claim(repro)
    why_not = repro.claim.why_not if repro.claim and claimed is not None else ""
    return Row(0, claimed, value, None, repro, rec.model, rec.entry, f"profile {rec.profile}", rec.framework,
               rec.date, spread, why_not, ledger_note(runs), rules_note(runs))


def on_claim_host(r: Reproduction) -> bool:
    """Whether the run ran on the host class its entry's claim names (runs of an entry that
    claims no profile figure are taken as they are)."""
    return r.claim is None or r.claim.comparable


def profile_group(r: Reproduction) -> str:
    """The profile an entry's run is grouped under: that of the claim it is compared with,
    else the one it ran on."""
    return r.claim.profile if r.claim and r.claim.comparable else str(r.record.profile)


def _rank(rows: list[Row]) -> list[Row]:
    inf = float("inf")
    rows.sort(key=lambda r: (r.claimed is None, r.claimed if r.claimed is not None else inf,
                             r.reproduced if r.reproduced is not None else inf, r.team, r.model))
    for i, row in enumerate(rows, start=1):
        row.rank = i
    return rows


def build_table(ft: FormatTask, objective: Objective, claims: list[Claim], repros: list[Reproduction]) -> Table:
    claims = [c for c in claims if c.task == ft.task_id and c.kind == objective.kind]
    repros = [r for r in repros if r.record.task == ft.task_id]
    rows: list[Row] = []
    paired: set[int] = set()
    for claim in claims:
        if objective.claimed(claim) is None:
            continue  # e.g. no costPerHour: the claim is on the time table only
        # The claim's host class: the runs its reproducing entry holds against the claim.
        matching = [r for r in repros if claim.name in r.record.dawnbench_claims and on_claim_host(r)]
        paired.update(id(r) for r in matching)
        rows.append(_claim_row(claim, objective, matching))
    by_entry: dict[tuple[str, str], list[Reproduction]] = {}
    for r in repros:
        if id(r) not in paired:
            by_entry.setdefault((r.record.entry, profile_group(r)), []).append(r)
    for runs in by_entry.values():
        row = _entry_row(runs, objective)
        # A group of runs none of which counts is still shown, with why (smoke runs alone are
        # pipeline checks: no row).
        if row.claimed is not None or row.reproduced is not None or any(not r.record.smoke for r in runs):
            rows.append(row)
    return Table(ft, objective, _rank(rows))


def build_tables(claims: list[Claim], repros: list[Reproduction]) -> list[Table]:
    return [build_table(ft, obj, claims, repros) for ft in FORMAT_TASKS for obj in OBJECTIVES]
