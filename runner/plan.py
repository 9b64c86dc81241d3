"""The run plan: what one ``runner reproduce`` will do, decided once.

Which entry, smoke or not, which engine, where it runs (this host or a Slurm job array),
and the seeds: the runner's (or the auditor's ``--seed``), never the entry's, one per run,
``seed, seed+1, ...`` for the manifest's ``runs`` or ``--runs``. Local runs and Slurm job
arrays take their seeds from here, so the rule exists once.
"""

from __future__ import annotations

import secrets
from dataclasses import asdict, dataclass
from pathlib import Path

from runner.options import ReproduceOptions

LOCAL, SLURM = "local", "slurm"


@dataclass(frozen=True)
class RunPlan:
    entry_path: Path
    entry_name: str
    task: str
    seeds: tuple[int, ...]
    smoke: bool
    placement: str  # LOCAL or SLURM
    engine: str  # runner.engine.kinds: docker or podman

    def to_dict(self) -> dict:
        return {**asdict(self), "entry_path": str(self.entry_path)}


def make_plan(entry_path: str | Path, opts: ReproduceOptions, placement: str = LOCAL) -> RunPlan:
    from runner.engine.kinds import current
    from runner.manifest import load_entry

    entry = load_entry(entry_path)
    first = secrets.randbelow(2**31) if opts.seed is None else opts.seed
    runs = opts.runs or entry.runs
    return RunPlan(entry.path, entry.name, entry.task.id, tuple(range(first, first + runs)), opts.smoke,
                   placement, current().name)
