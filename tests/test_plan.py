"""The run plan decides the seeds once, for local runs and Slurm job arrays alike."""

from __future__ import annotations

from pathlib import Path

from runner.options import ReproduceOptions
from runner.plan import LOCAL, SLURM, make_plan

ENTRY = Path(__file__).resolve().parents[1] / "entries" / "mnist-cnn-cpu"


def test_the_auditors_seed_gives_successive_seeds_on_every_placement():
    local = make_plan(ENTRY, ReproduceOptions(seed=7, runs=3))
    slurm = make_plan(ENTRY, ReproduceOptions(seed=7, runs=3), SLURM)
    assert local.seeds == slurm.seeds == (7, 8, 9)
    assert (local.placement, slurm.placement) == (LOCAL, SLURM)
    assert local.entry_name == "mnist-cnn-cpu" and local.task == "mnist"


def test_without_a_seed_the_runner_draws_one_and_the_manifest_sets_the_count():
    drawn = {make_plan(ENTRY, ReproduceOptions()).seeds for _ in range(4)}
    assert all(len(seeds) == 1 for seeds in drawn)  # the manifest's runs: 1
    assert len(drawn) > 1  # drawn afresh, never the entry's
