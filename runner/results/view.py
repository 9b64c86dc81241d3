"""A run as the leaderboard and the DAWNBench export see it: the typed result
(``runner.results.record.Result``) flattened to the figures they show, with the paths of
its curve and latencies. Built only from ``Result``, so a change to ``result.json`` is
absorbed by the type, nowhere else; its backends are the result's own inference records
(``runner.results.inference.BackendRun``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from runner.errors import UserError

from runner.results.inference import BackendRun
from runner.results.record import RESULT_FILE, Result

CURVE_FILE = "curve.tsv"
INFERENCE_DIR = "inference"
LATENCIES_FILE = "latencies_ns.npy"  # per item, batch 1, written by the inference phase


@dataclass(frozen=True)
class ResultRecord:
    folder: Path
    run_id: str
    entry: str
    model: str
    framework: str
    source: str | None
    task: str
    metric: str
    threshold: float  # a fraction
    status: str
    conforming: bool
    nonconforming_reasons: list[str]
    smoke: bool
    profile: str | None
    reached: bool
    tta_seconds: float | None
    training_usd: float | None
    usd_per_hour: float | None
    claimed: dict  # the entry's own claim (tta_seconds, latency_ms, score, dawnbench)
    backends: dict[str, BackendRun] = field(default_factory=dict)  # result.json's inference
    joules_to_accuracy: float | None = None  # training energy to the crossing, frozen time excluded
    cross_seed: dict | None = None  # training.cross_seed: the runs compared across seeds (None: before it)
    tta_resolution_seconds: float | None = None  # the step the evaluations time TTA in (None: not stated)
    variant: dict | None = None  # a study's variant of the entry (result.json's variant; None: the entry's own)
    ledger: dict | None = None  # its place in its signing key's ledger (result.json's ledger; None: before it)
    rules_version: str = "1"  # the task's rules it was made under (result.json's rules; "1": before versions)

    @property
    def complete(self) -> bool:
        return self.status == "complete"

    @property
    def date(self) -> str:
        """The run's UTC date, yyyy-mm-dd, from its id (``20261122T010203Z-...``)."""
        stamp = self.run_id[:8]
        return f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]}"

    @property
    def dawnbench_claims(self) -> frozenset[str]:
        """The DAWNBench submissions (file stems) the entry says it reproduces."""
        names = self.claimed.get("dawnbench")
        names = [names] if isinstance(names, str) else names if isinstance(names, list) else []
        return frozenset(n for n in names if isinstance(n, str))

    def gated_backends(self) -> list[BackendRun]:
        """Backends whose predictions met the threshold, fastest first."""
        ok = [b for b in self.backends.values() if b.passed_gate and b.mean_ms is not None]
        return sorted(ok, key=lambda b: b.mean_ms if b.mean_ms is not None else math.inf)

    def curve_path(self) -> Path:
        return self.folder / CURVE_FILE

    def latencies_path(self, backend: str) -> Path:
        return self.folder / INFERENCE_DIR / backend / LATENCIES_FILE


def _framework(framework: object) -> str:
    if isinstance(framework, dict):
        return " ".join(str(framework[k]) for k in ("name", "version") if framework.get(k))
    return str(framework or "")


def _joules_to_accuracy(energy: object) -> float | None:
    training = energy.get("training") if isinstance(energy, dict) else None
    value = training.get("joules_to_accuracy") if isinstance(training, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def read_record(folder: Path) -> ResultRecord:
    """``folder/result.json`` as a record; a missing or malformed file is a UserError."""
    path = Path(folder) / RESULT_FILE
    try:
        result = Result.read(folder)
        training, cost = result.training, result.cost
        if cost is None:  # a placeholder of a run that never started: not a record to list
            raise ValueError("result.json has no cost section")
        return ResultRecord(
            folder=Path(folder),
            run_id=result.run_id,
            entry=result.entry.name,
            model=str(result.entry.model or ""),
            framework=_framework(result.entry.framework),
            source=result.entry.source,
            task=result.task.id,
            metric=result.task.metric,
            threshold=float(result.task.threshold),
            status=result.status,
            conforming=result.conforming is True,
            nonconforming_reasons=[str(r) for r in result.nonconforming_reasons],
            smoke=bool(result.smoke),
            profile=(result.hardware or {}).get("profile"),
            reached=bool(training and training.reached),
            tta_seconds=training.tta_seconds if training else None,
            training_usd=cost.training_usd,
            usd_per_hour=cost.usd_per_hour,
            claimed=dict(result.entry.claimed or {}),
            backends=dict(result.inference),
            joules_to_accuracy=_joules_to_accuracy(result.energy),
            cross_seed=training.cross_seed if training else None,
            tta_resolution_seconds=training.tta_resolution_seconds if training and training.reached else None,
            variant=result.variant,
            ledger=result.ledger if isinstance(result.ledger, dict) else None,
            rules_version=result.rules_version,
        )
    except FileNotFoundError:  # Result.read's MissingResult
        raise UserError(f"{path} does not exist", "pass a result folder written by `runner reproduce`") from None
    except UserError:
        raise  # the file and why, in one line (Result.read through runner.safe_read)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise UserError(
            f"{path}: not a readable result ({type(err).__name__}: {err})",
            "pass a result folder written by `runner reproduce`",
        ) from None
