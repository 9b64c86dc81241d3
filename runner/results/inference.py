"""One backend's inference record in ``result.json`` as a type: ``BackendRun``.

The inference phase (``runner.inference``) writes one record per backend under
``result.json``'s ``inference``; the CLI, the leaderboard's view, the bundle's claim, the
comparison figures and the roofline study read them back. Each used to pick fields out of
a raw dict with its own ``.get`` chain; they now read the same typed attributes, and a new
field is added here once.

A record read back writes out exactly as it was read: the same keys and the same values,
so a result (and the claim a bundle signs over it) does not change by being read and
written again. Hence the values are kept as the JSON had them, unvalidated (a reader
still checks a figure's type before doing arithmetic on it), fields the JSON lacked stay
absent on the way out (``missing``), and fields a backend added that this type does not
name are kept in ``extra``.

``runner.verify`` reads a bundle's copy as untrusted dicts and does not use this type for
its checks; a function shared with it (``runner.score.model_origin``) takes plain dicts,
which ``as_dicts`` gives from typed records.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field, fields


@dataclass
class BackendRun:
    """``result.json``'s ``inference.<name>``: one backend's gated, timed batch-1 pass.

    The fields are those every record has (``runner.inference.measure.evaluate_backend`` writes
    them all, the phase adds ``energy``; ``final_model_disagreement`` is added when the
    backend's own predictions could be compared with the scored final model).
    """

    name: str  # the backend (the key in ``inference``; not written in the record)
    passed_gate: bool = False  # predicted every item, met the threshold, fit the host's window
    gate_reason: str | None = None  # why not, when it did not pass
    error: str | None = None  # the harness or container failed (rather than the gate)
    scores: dict[str, float] | None = None  # fractions by metric (top1, top5, f1)
    count: int | None = None  # items predicted
    warmup: int | None = None  # untimed warm-up items
    latency_ms: dict[str, float] | None = None  # mean (DAWNBench's figure), p50, p90, p99, max
    throughput_per_s: float | None = None
    cost_per_10k_usd: float | None = None  # 10,000 items at the mean latency, at the profile's price
    window_seconds: float | None = None  # host-stamped infer_start..infer_stop
    timed_seconds: float | None = None  # the per-item latencies' sum
    info: dict | None = None  # the harness' info.json (backend version, settings, model digests)
    loadgen: dict | None = None  # LoadGen's settings and figures (runner.inference.loadgen), when it ran
    energy: dict | None = None  # the timed pass's joules and joules per 10,000 items (runner.energy)
    final_model_disagreement: float | None = None  # vs the scored final model's predictions
    # Fields a backend's record has that this type does not name, kept as they were.
    extra: dict[str, object] = field(default_factory=dict)
    # Record fields the JSON did not have (a result from before the field existed): written
    # back only once given a value other than the default.
    missing: frozenset[str] = field(default=frozenset(), repr=False)

    # -- figures ----------------------------------------------------------------------------
    @property
    def mean_ms(self) -> float | None:
        """The mean batch-1 latency (DAWNBench's figure), None when not measured."""
        value = self.latency_ms.get("mean") if isinstance(self.latency_ms, dict) else None
        return value if _number(value) else None

    def score(self, metric: str) -> float | None:
        return self.scores.get(metric) if isinstance(self.scores, dict) else None

    @property
    def version(self) -> str | None:
        """The backend's version as its harness reported it."""
        return self.info.get("version") if isinstance(self.info, dict) else None

    @property
    def joules_per_10k(self) -> float | None:
        """The timed pass's energy per 10,000 items (``runner.energy``)."""
        return self.energy.get("joules_per_10k_items") if isinstance(self.energy, dict) else None

    # -- JSON -------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, name: str, data: Mapping[str, object]) -> BackendRun:
        """The record ``data`` (a dict as ``result.json`` has it) of backend ``name``."""
        named = {key: data[key] for key in RECORD_FIELDS if key in data}
        extra = {key: value for key, value in data.items() if key not in RECORD_FIELDS}
        missing = frozenset(key for key in RECORD_FIELDS if key not in data)
        return cls(name=name, **named, extra=extra, missing=missing)  # type: ignore[arg-type]

    def to_dict(self) -> dict:
        """The record as ``result.json`` has it: what ``from_dict`` read, and what was set since."""
        out = {}
        for f in fields(self):
            if f.name not in RECORD_FIELDS:
                continue
            value = getattr(self, f.name)
            if f.name in self.missing and value == f.default:
                continue
            out[f.name] = copy.deepcopy(value)
        out.update(copy.deepcopy(self.extra))
        return out


RECORD_FIELDS = tuple(f.name for f in fields(BackendRun) if f.name not in ("name", "extra", "missing"))


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def read_section(section: object) -> dict[str, BackendRun]:
    """``result.json``'s ``inference`` as typed records. An entry that is not an object is
    left out, as every reader skipped it before the type; a section that is not an object
    is a ``ValueError`` (``Result.from_dict``'s error for a malformed result)."""
    if not isinstance(section, dict):
        raise ValueError(f"result.json's inference is not an object ({type(section).__name__})")
    return {str(name): BackendRun.from_dict(str(name), record)
            for name, record in section.items() if isinstance(record, dict)}


def as_dicts(runs: Mapping[str, BackendRun]) -> dict[str, dict]:
    """The records as ``result.json`` has them, for code shared with ``runner.verify``,
    which reads a bundle's records as untrusted dicts."""
    return {name: run.to_dict() for name, run in runs.items()}
