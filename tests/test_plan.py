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


def test_the_plan_saved_with_a_result_reads_back_as_the_same_plan(tmp_path):
    """What a node agent is sent and a replay reads: the plan, through plan.json."""
    from runner.plan import RunData, RunPlan

    plan = make_plan(ENTRY, ReproduceOptions(seed=11, runs=2, smoke=True, loadgen="mlperf",
                                             hyperparameters={"lr": "0.1"}))
    plan = plan.resolved(gpus=0, backends=["torch"], image="sha256:abc",
                         data=RunData(tmp_path / "train", tmp_path / "eval", "sha256:d",
                                      ((tmp_path / "glove", "/data/public/glove"),)))
    plan = plan.for_run(12, tmp_path / "run", tmp_path / "scratch", tmp_path / "probe")
    (tmp_path / "run").mkdir()
    plan.write(tmp_path / "run")
    back = RunPlan.read(tmp_path / "run")
    assert back.to_dict() == plan.to_dict()
    assert back.entry.train.command == plan.entry.train.command  # the smoke form, again
    assert back.train_env() == plan.train_env() and back.train_env()["RUNNER_HP_LR"] == "0.1"
    assert back.options.loadgen == "mlperf" and back.seed == 12 and back.sensitivity_seed == 12 ^ 0x5EED


def test_a_result_written_before_plans_were_saved_has_none(tmp_path):
    from runner.plan import RunPlan

    assert RunPlan.read(tmp_path) is None


def test_a_slurm_task_refuses_a_seed_its_plan_does_not_hold(tmp_path):
    import pytest

    from runner.errors import UserError
    from runner.plan import PLAN_FILE, plan_of_task

    make_plan(ENTRY, ReproduceOptions(seed=3, runs=2), SLURM).write(tmp_path)
    assert plan_of_task(tmp_path / PLAN_FILE, 4).seeds == (4,)
    with pytest.raises(UserError, match="not one of the plan's seeds"):
        plan_of_task(tmp_path / PLAN_FILE, 9)
