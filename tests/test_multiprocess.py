"""Two training processes on one host (``runner.run.multiprocess``), on the real engine:
the gloo-pair test entry trains MNIST data-parallel over an internal Docker network."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner import data
from runner.build import build_entry
from runner.manifest import load_entry
from runner.run.container import MANAGED_LABEL
from runner.run.multiprocess import rank_env, run_multiprocess_training
from runner.run.training import TrainingInputs
from runner.score.evaluations import score_evaluations
from runner.score.tta import time_to_accuracy, timeline

pytestmark = pytest.mark.docker
GLOO_PAIR = Path(__file__).parent / "entries" / "gloo-pair"


def test_each_rank_gets_torchruns_variables_and_one_thread():
    env = rank_env({"RUNNER_SEED": "3"}, "runner-x", 1, 2)
    assert env["MASTER_ADDR"] == "runner-x-rank0" and env["RANK"] == "1"
    assert (env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"], env["RUNNER_THREADS"]) == ("2", "2", "1")
    assert env["RUNNER_SEED"] == "3"


def test_the_manifest_asks_for_processes_and_nodes():
    entry = load_entry(GLOO_PAIR)
    assert (entry.nodes, entry.processes_per_node, entry.world_size) == (1, 2, 2)
    default = load_entry(Path(__file__).parent / "entries" / "contract-probe")
    assert (default.nodes, default.processes_per_node) == (1, 1)


def test_two_gloo_processes_train_with_one_clock_and_rank_zeros_events(
    docker_client, cpu_base_image, tmp_path, capsys
):
    entry = load_entry(GLOO_PAIR)
    built = build_entry(entry, docker_client)
    staged = data.staged("mnist")
    labels = staged.load_eval_labels()
    result_dir = tmp_path / "20261122T000000Z-s0-gloo00"
    run = run_multiprocess_training(docker_client, TrainingInputs(
        image=built.image_id, command=entry.train.command, train_dir=staged.train_dir,
        eval_dir=staged.eval_dir, result_dir=result_dir,
        env={"RUNNER_TASK": "mnist", "RUNNER_SEED": "0", "RUNNER_DATA": "/data",
             "RUNNER_OUTPUT": "/output", "RUNNER_SMOKE": "0", "HOME": "/scratch"},
        cpus=2, memory="4g", gpus=0, timeout_s=600,
    ), world_size=entry.world_size)
    logs = sorted((result_dir / "logs").glob("*.log")) if (result_dir / "logs").exists() else []
    assert run.outcome.ok, (run.outcome, [p.read_text()[-1500:] for p in logs])
    # Every rank's log is kept; both joined the same process group over the run's network.
    logs = {p.name: p.read_text() for p in (result_dir / "logs").iterdir()}
    assert sorted(logs) == ["train-rank1.log", "train.log"]
    assert "rank 0 of 2 joined" in logs["train.log"] and "rank 1 of 2 joined" in logs["train-rank1.log"]
    assert "route out: no" in logs["train.log"]  # the ranks reach each other and nothing else
    # Only rank 0's events are the run's; they drive the timeline and TTA.
    keys = [e.key for e in run.events]
    assert keys[0] == "run_start" and keys[-1] == "run_stop"
    assert keys.count("eval_stop") == keys.count("epoch_start") >= 2
    line = timeline(run.events)
    scored = score_evaluations(entry.task, line, result_dir / "output", labels)
    tta = time_to_accuracy(line, [s.meets for s in scored])
    assert all(s.problem is None and s.count == 10_000 for s in scored)
    assert tta.reached, [s.scores for s in scored]
    assert 0 < tta.seconds < run.outcome.wall_seconds
    with capsys.disabled():
        print(f"\ngloo-pair: TTA {tta.seconds:.2f} s (crossing at evaluation {tta.crossing}), "
              f"wall {run.outcome.wall_seconds:.1f} s, scores "
              f"{[round(s.scores['top1'], 4) for s in scored]}")
    # Nothing of this run is left behind: no container, no network (other runs may share
    # the engine, so look for this run's names only).
    run_name = f"runner-{result_dir.name}".lower()
    assert docker_client.containers.list(all=True, filters={"name": run_name}) == []
    assert [n for n in docker_client.networks.list(filters={"label": MANAGED_LABEL})
            if n.name == run_name] == []


def test_an_entry_spanning_nodes_is_refused_in_one_line():
    from runner.errors import UserError
    from runner.run.multiprocess import check_one_host

    check_one_host(1)
    with pytest.raises(UserError, match="asks for 2 nodes.*Fix: set nodes: 1"):
        check_one_host(2)
