"""Which runs one MLPerf system's benchmark may hold, decided before anything is written.

MLPerf scores a benchmark over a fixed number of runs of ONE system (one ``systems/<name>.json``)
with the olympic mean, and trusts every run in the folder to be a different run of that system.
So the export refuses:

- the same run twice (its run id, its clock record ``events.jsonl`` or its rendered log);
- a seed repeated among the runs (MLPerf counts each seed once; its closed-division seed
  checker refuses the same seed logged twice);
- runs of different host classes under one system. A host class is what the result records
  of the machine: the hardware profile the run was admitted under (``result.json``'s
  ``hardware.profile``) and, from the signed ``fingerprint.json``, the CPU architecture,
  model, socket and logical-core counts and the GPU models. A profile such as
  ``cpu-2core-x86`` admits an Intel Xeon and an AMD EPYC alike, so the profile alone is not
  a system;
- a run that does not count (``runner.verify.verdict.judge``): not verified under the
  trusted keys, or verified but no benchmark result (incomplete, non-conforming, smoke, a
  study's variant). Smoke runs are let through only by ``--allow-smoke``, into a tree marked
  as not a submission.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from securesystemslib.signer import SSlibKey

from runner.errors import UserError
from runner.safe_read import object_field
from runner.verify.verdict import judge, require_counts, standing_problems

REFUSED_FIX = "pass each run once; run more with `runner reproduce ENTRY --runs N`"


@dataclass(frozen=True)
class HostClass:
    """What makes two runs' machines the same MLPerf system."""

    profile: str
    architecture: str
    cpu: str
    sockets: int | None
    cores: int | None  # logical cores the host had
    gpus: tuple[str, ...]  # one model name per GPU, sorted

    def __str__(self) -> str:
        cpu = f"{self.sockets}x {self.cpu}" if self.sockets and self.sockets > 1 else self.cpu
        parts = [cpu or f"an unnamed {self.architecture or 'CPU'}",
                 f"{self.cores} cores" if self.cores else "cores not recorded"]
        for name in sorted(set(self.gpus)):
            parts.append(f"{self.gpus.count(name)}x {name}")
        return f"`{', '.join(parts)}` (profile {self.profile})"


def fingerprint_of(folder: Path) -> dict:
    try:
        data = json.loads((Path(folder) / "fingerprint.json").read_text())
    except (OSError, json.JSONDecodeError):
        raise UserError(f"{folder} has no readable fingerprint.json",
                        "restore it from the result's signed bundle") from None
    if not isinstance(data, dict):
        raise UserError(f"{folder}/fingerprint.json is not an object", "restore it from the result's signed bundle")
    return data


def host_class(folder: Path, result: dict) -> HostClass:
    fingerprint = fingerprint_of(folder)
    cpu, gpu = object_field(fingerprint, "cpu"), object_field(fingerprint, "gpu")
    gpus = [g for g in gpu.get("gpus") or [] if isinstance(g, dict)]
    hardware = object_field(result, "hardware")

    def count(value: object) -> int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return HostClass(
        profile=str(hardware.get("profile") or "not recorded"),
        architecture=str(cpu.get("architecture") or ""),
        cpu=" ".join(str(cpu.get("model_name") or "").split()),
        sockets=count(cpu.get("sockets")),
        cores=count(cpu.get("logical_cores")),
        gpus=tuple(sorted(str(g.get("name") or "unnamed GPU") for g in gpus)),
    )


def _names(run_ids: list[str]) -> str:
    return ", ".join(run_ids[:-1]) + f" and {run_ids[-1]}" if len(run_ids) > 1 else run_ids[0]


def refuse_mixed_hosts(runs: list[tuple[Path, dict]]) -> HostClass:
    """The one host class of all the runs, or a refusal naming each class and its runs."""
    classes: dict[HostClass, list[str]] = defaultdict(list)
    for folder, result in runs:
        classes[host_class(folder, result)].append(str(result.get("run_id") or folder.name))
    if len(classes) == 1:
        return next(iter(classes))
    (first, first_runs), *others = classes.items()
    said = "; ".join(f"{_names(ids)} on {cls}" for cls, ids in others)
    raise UserError(f"runs {_names(first_runs)} ran on {first} but {said}: one MLPerf system holds one host class",
                    "export the runs of each host separately, each under its own mlperf.platform")


def refuse_repeated_seeds(runs: list[tuple[Path, dict]]) -> None:
    by_seed: dict[object, list[str]] = defaultdict(list)
    for folder, result in runs:
        by_seed[result.get("seed")].append(str(result.get("run_id") or folder.name))
    repeated = {seed: ids for seed, ids in by_seed.items() if len(ids) > 1}
    if repeated:
        seed, ids = next(iter(repeated.items()))
        others = len(repeated) - 1
        more = f" (and {others} other seed{'s' if others > 1 else ''} repeated)" if others else ""
        raise UserError(f"runs {_names(ids)} used the same seed {seed}{more}: MLPerf counts each seed once",
                        "export runs of distinct seeds; run another with `runner reproduce ENTRY --seed N`")


def _digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def refuse_duplicates(runs: list[tuple[Path, dict]], logs: list[str]) -> None:
    """The same run passed twice (by run id, by its clock record, by its rendered log) would
    count twice in MLPerf's olympic mean."""
    seen: dict[tuple[str, object], Path] = {}
    for (folder, result), log in zip(runs, logs):
        for key in (("run id", result.get("run_id")), ("events.jsonl", _digest(folder / "events.jsonl")),
                    ("MLPerf log", hashlib.sha256(log.encode()).hexdigest())):
            if key[1] is None:
                continue
            if key in seen:
                raise UserError(f"{folder} and {seen[key]} are the same run (the same {key[0]}"
                                + (f" {key[1]}" if key[0] == "run id" else "") + "): MLPerf would count it twice",
                                REFUSED_FIX)
            seen[key] = folder


# What a smoke run's verdict says on top of a benchmark result's, from the verdict's own words.
SMOKE_REASONS = tuple(standing_problems({"smoke": True, "status": "complete", "conforming": True}))


def require_counting(given: list[Path], trusted: list[SSlibKey], allow_smoke: bool) -> bool:
    """Every run counts (``runner verify`` exits 0 on it); with ``allow_smoke``, a smoke run
    that verifies passes too, whatever else keeps it from counting (a smoke run is marked
    non-conforming, and a test host may be contended): the tree is then marked as no
    submission. Returns whether any smoke run was let in."""
    smoke = False
    for path in given:
        verdict = judge(path, trusted)
        if allow_smoke and verdict.verified and any(r in SMOKE_REASONS for r in verdict.reasons):
            smoke = True
            continue
        require_counts(verdict, f"MLPerf export of {path}")
    return smoke
