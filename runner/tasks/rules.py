"""A task's rules as versioned data: what ``runner verify`` judges a result by.

Each task package keeps its rules in ``rules/<version>.toml`` beside its ``__init__.py``,
one file per published version (``1.toml``, ``2.toml``...), every value stated: the
threshold, the calibrated limits (descent, cross-seed) and the limits every task shares
today (probe, evidence of training, information budget). The newest version is today's:
discovery (``runner.tasks.discover``) applies it to the task (``Task.rules_version``,
``Task.rules``), a run records it (result.json's ``rules``), and ``runner verify`` judges a
result by the version it records (``Task.under``), saying what today's rules would say when
they differ. A published version is never edited: a new limit is a new version.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields
from pathlib import Path

RULES_DIR = "rules"  # beside the task package's __init__.py
FIRST = "1"  # the version of results that record none (made before rules had versions)


@dataclass(frozen=True)
class Rules:
    """One version of a task's rules. The defaults are the runner's general limits as of
    version 1 (a task declared in code without a rules folder, as tests do, is judged by
    them and its own threshold); a rules file states every value."""

    task: str
    version: str
    threshold: float  # the primary metric's threshold, a fraction (SQuAD: F1 / 100)
    descent_similarity: float = 0.10  # runner.score.descent: least cosine a tensor may keep with its start
    cross_seed_mistakes: float = 0.9  # runner.score.across_runs: Jaccard of two seeds' mistakes
    cross_seed_weights: float = 0.5  # ... correlation of their aligned weights
    probe_gap: float = 0.10  # runner.score.probe: what the crossing may lose on the probe
    probe_items: int = 2000  # ... the fewest items a conforming probe predicts
    evidence_fraction: float = 1.5  # runner.score.training_evidence: forward passes the training must cost
    information_budget: int = 32 * 1024  # runner.entry_build.information: bytes, compressed

    @property
    def label(self) -> str:
        return f"{self.task} rules v{self.version}"

    def differences(self, other: Rules) -> list[str]:
        """The values that differ from ``other``'s, as "name a -> b"."""
        return [f"{f.name} {getattr(self, f.name)!r} -> {getattr(other, f.name)!r}" for f in fields(self)
                if f.name not in ("task", "version") and getattr(self, f.name) != getattr(other, f.name)]


_LIMITS = {f.name: f.type for f in fields(Rules) if f.name not in ("task", "version")}


def read_rules(path: Path, task_id: str) -> Rules:
    """One rules file; ``ImportError`` (a broken declaration) when it lacks or adds a value."""
    version = path.stem
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise ImportError(f"{path}: not readable TOML ({err})") from None
    missing, unknown = sorted(set(_LIMITS) - set(data)), sorted(set(data) - set(_LIMITS))
    if missing or unknown:
        raise ImportError(f"{path}: every rule is stated, no other: missing {missing}, unknown {unknown}")
    values: dict[str, int | float] = {}
    for name, kind in _LIMITS.items():
        value = data[name]
        ok = isinstance(value, int) if kind == "int" else isinstance(value, (int, float))
        if isinstance(value, bool) or not ok:
            raise ImportError(f"{path}: {name} = {value!r} is not a{'n integer' if kind == 'int' else ' number'}")
        values[name] = value if kind == "int" else float(value)
    return Rules(task_id, version, **values)  # type: ignore[arg-type]  # each checked against _LIMITS' kind above


def load_rules(folder: Path, task_id: str) -> tuple[Rules, ...]:
    """Every version in ``folder`` (``<version>.toml``, a whole number), oldest first; none:
    ``ImportError``."""
    found = list(Path(folder).glob("*.toml"))
    if not found:
        raise ImportError(f"task {task_id} declares no rules ({Path(folder)}/<version>.toml)")
    if odd := sorted(p.name for p in found if not (p.stem.isdigit() and p.stem == str(int(p.stem)))):
        raise ImportError(f"{Path(folder)}: a rules file is named by its version, a whole number (not {odd})")
    found.sort(key=lambda p: int(p.stem))  # "10" after "9"
    return tuple(read_rules(path, task_id) for path in found)
