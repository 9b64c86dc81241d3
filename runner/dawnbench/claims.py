"""A *claim*: one DAWNBench submission (training or inference) as published, in one typed
record, and where claims live under the results folder (``claims/<task>/<kind>/<name>.json``).

A claim is what someone said; a reproduction is what the runner measured. The leaderboard
puts them side by side. A stored claim is read back as untrusted (anyone can edit the file):
bounded JSON, finite non-negative figures, or a one-line error naming the file. A curve of
millions of rows is written one row a line, never held twice in memory as text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path

from runner.errors import UserError
from runner.events import bounded_json
from runner.manifest.untrusted_yaml import check_numbers
from runner.results.folder import write_text_atomically

CLAIMS_DIR = "claims"
KINDS = ("train", "inference")


@dataclass(frozen=True, slots=True)  # slots: a published curve can have millions of rows
class CurvePoint:
    epoch: float  # whole in most files, fractional in a few (1.00096)
    hours: float  # cumulative training time at the end of the epoch
    scores: dict[str, float]  # column -> value in DAWNBench's unit (percent, or F1 as a fraction)


@dataclass(frozen=True)
class Claim:
    name: str  # the file's stem: [author]_[model]_[hardware tag]_[framework]
    task: str  # the runner's task id (cifar10, imagenet, squad-v1.1, mnist, fashion-mnist)
    kind: str  # "train" or "inference"
    team: str
    model: str
    hardware: str
    framework: str
    date: str  # ISO yyyy-mm-dd (DAWNBench's files are not always zero-padded)
    source: str  # the file the claim was read from
    code_url: str | None = None
    # Training: the first TSV row that meets the threshold; None if no row does.
    tta_hours: float | None = None
    cost_per_hour_usd: float | None = None
    cost_usd: float | None = None  # tta_hours x costPerHour
    curve: list[CurvePoint] = field(default_factory=list)
    # Inference: latency of one item at batch 1, cost of 10,000 items (the files hold per item).
    latency_ms: float | None = None
    cost_per_10k_usd: float | None = None
    accuracy: float | None = None  # as a fraction (0.94), the task's metric
    notes: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        """Unique within a task: train and inference files often share a name."""
        return f"{self.kind}/{self.name}"

    @property
    def tta_seconds(self) -> float | None:
        return None if self.tta_hours is None else self.tta_hours * 3600

    def to_dict(self) -> dict:
        """The stored form (``dataclasses.asdict`` would deep-copy every point of the curve)."""
        return {f.name: getattr(self, f.name) for f in fields(self)} | {
            "curve": [point_dict(p) for p in self.curve], "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, data: dict) -> Claim:
        curve = [CurvePoint(p["epoch"], float(p["hours"]), dict(p["scores"])) for p in data.get("curve", [])]
        claim = cls(**{**data, "curve": curve, "notes": list(data.get("notes", []))})
        for name in FIGURES:
            value = getattr(claim, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
                raise ValueError(f"{name} is {value!r}, not a non-negative number")
        return claim


# The figures a table or a ratio is computed from.
FIGURES = ("tta_hours", "cost_per_hour_usd", "cost_usd", "latency_ms", "cost_per_10k_usd", "accuracy")


def point_dict(point: CurvePoint) -> dict:
    return {"epoch": point.epoch, "hours": point.hours, "scores": point.scores}


def claim_path(results: Path, claim: Claim) -> Path:
    return results / CLAIMS_DIR / claim.task / claim.kind / f"{claim.name}.json"


def _claim_text(claim: Claim):
    """The claim as indented JSON, its curve one row a line: chunks, so a curve of
    millions of rows is written as it is encoded (by the C encoder, row by row)."""
    head = {f.name: getattr(claim, f.name) for f in fields(claim) if f.name != "curve"}
    yield json.dumps(head, indent=2, sort_keys=True)[:-2] + ',\n  "curve": ['
    encode = json.JSONEncoder(sort_keys=True, allow_nan=False).encode
    for i, point in enumerate(claim.curve):
        yield ("\n    " if i == 0 else ",\n    ") + encode(point_dict(point))
    yield "\n  ]\n}\n"


def save_claim(results: Path, claim: Claim) -> Path:
    path = claim_path(results, claim)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(path, _claim_text(claim))
    return path


def load_claims(results: Path) -> list[Claim]:
    """Every claim stored under ``results/claims/``, in a stable order."""
    claims = []
    for path in sorted((results / CLAIMS_DIR).glob("*/*/*.json")):
        try:
            data = bounded_json(path.read_text())
            check_numbers(data, str(path))  # NaN, infinities, 1e300: no table or ratio survives them
            if not isinstance(data, dict):
                raise ValueError(f"a JSON {type(data).__name__}, not an object")
            claims.append(Claim.from_dict(data))
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as err:
            raise UserError(
                f"{path}: not a stored claim ({type(err).__name__}: {err})",
                "delete it and run `runner import dawnbench` again",
            ) from None
    return claims
