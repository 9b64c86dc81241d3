"""Two training processes on one host (``runner.run.multiprocess``) under the run contract,
on the real engine: the gloo-pair test entry trains MNIST data-parallel, its ranks sharing
rank 0's loopback-only network namespace; rank 0's launcher starts the one clock and its requests are evaluated by
the runner while every rank is frozen."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.cli import main
from runner.manifest import load_entry
from runner.engine.containers import MANAGED_LABEL, ContainerSpec
from runner.run.multiprocess import rank_env, rank_spec
from runner.results.layout import entry_runs

pytestmark = pytest.mark.docker
GLOO_PAIR = Path(__file__).parent / "entries" / "gloo-pair"


def test_each_rank_gets_torchruns_variables_and_one_thread():
    env = rank_env({"RUNNER_SEED": "3"}, "runner-x", 1, 2)
    assert env["RANK"] == "1"
    assert (env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"], env["RUNNER_THREADS"]) == ("2", "2", "1")
    assert (env["LOCAL_RANK"], env["GROUP_RANK"]) == ("1", "0")
    assert env["RUNNER_SEED"] == "3"
    # One host: the ranks share rank 0's loopback; across nodes they meet by name.
    assert (env["MASTER_ADDR"], env["GLOO_SOCKET_IFNAME"]) == ("127.0.0.1", "lo")
    across = rank_env({}, "runner-x", 3, 4, per_node=2, across_nodes=True)
    assert (across["MASTER_ADDR"], across["GLOO_SOCKET_IFNAME"], across["GROUP_RANK"]) == ("runner-x-rank0", "eth0", "1")


def test_on_one_host_every_rank_joins_rank_zeros_network_namespace_and_rank_zero_has_none():
    spec = ContainerSpec(image="img", command=["python3"], mounts=[])
    zero, one = (rank_spec(spec, "runner-x", None, r, 2, 0) for r in (0, 1))
    assert (zero.network, zero.network_of, zero.name) == (None, None, "runner-x-rank0")
    assert (one.network, one.network_of, one.name) == (None, "runner-x-rank0", "runner-x-rank1")
    remote = rank_spec(spec, "runner-x", "cluster-net", 1, 2, 0, per_node=1)
    assert (remote.network, remote.network_of) == ("cluster-net", None)


def test_the_manifest_asks_for_processes_and_nodes():
    entry = load_entry(GLOO_PAIR)
    assert (entry.nodes, entry.processes_per_node, entry.world_size) == (1, 2, 2)
    default = load_entry(Path(__file__).parent / "entries" / "contract-probe")
    assert (default.nodes, default.processes_per_node) == (1, 1)


def test_two_gloo_processes_train_with_one_clock_and_rank_zeros_events(
    docker_client, cpu_base_image, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("RUNNER_RESULTS", str(tmp_path / "results"))
    code = main(["reproduce", str(GLOO_PAIR), "--smoke", "--no-infer"])
    (folder,) = entry_runs(tmp_path / "results", "gloo-pair")
    logs = {p.name: p.read_text() for p in (folder / "logs").iterdir()}
    result = json.loads((folder / "result.json").read_text())
    assert code == 0 and result["status"] == "complete", (result["incomplete_reason"], logs)
    # Every rank's log is kept; both joined the same process group over the run's network.
    assert {"train.log", "train-rank1.log", "evaluator.log"} <= set(logs)
    assert "rank 0 of 2 joined" in logs["train.log"] and "rank 1 of 2 joined" in logs["train-rank1.log"]
    # One clock: rank 0's launcher; only rank 0 asked for evaluations, the runner made them.
    training = result["training"]
    assert training["launch_stamp"] == "launcher"
    events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
    requests = [e for e in events if e["key"] == "eval_request"]
    assert requests and len(training["evaluations"]) == len(requests)
    assert all(e["excluded"] and e["problem"] is None for e in training["evaluations"])
    with capsys.disabled():
        print(f"\ngloo-pair (smoke): TTA {training['tta_seconds']}, wall {training['wall_seconds']:.1f} s, "
              f"scores {[e['scores'] for e in training['evaluations']]}")
    # The ranks shared a loopback and nothing else; nothing of the run is left behind.
    assert "route out: no" in logs["train.log"]
    run_name = f"runner-{folder.name}".lower()
    assert docker_client.containers.list(all=True, filters={"name": run_name}) == []
    assert [n for n in docker_client.networks.list(filters={"label": MANAGED_LABEL}) if n.name == run_name] == []
