"""A run spanning two nodes through a real Slurm: two slurmd "nodes" on this machine (the
``local_slurm`` fixture's ``pair`` partition), the gloo-pair entry with ``nodes: 2,
processes_per_node: 1``, submitted by ``runner reproduce --slurm``.

The job asks for both nodes; the runner on the first runs rank 0 and starts rank 1 on the
second through ``srun`` and its node agent. Both nodes share this machine's Docker engine,
so the cluster network the runner is given is an internal bridge network the test creates.
One run (about a minute) is checked from several sides.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import time
from pathlib import Path

import docker
import jsonschema
import pytest
import yaml

from runner.bundle.filelist import ENVELOPE
from runner.cli import main
from runner.fingerprint import load_fingerprint
from runner.keys import generate
from runner.results import RESULT_SCHEMA
from runner.results.layout import entry_runs
from runner.run.allocation import NETWORK_ENV
from runner.engine.containers import MANAGED_LABEL
from runner.run.ownership import LABEL_RUN

pytestmark = [pytest.mark.slurm, pytest.mark.docker]
GLOO_PAIR = Path(__file__).parent.parent / "entries" / "gloo-pair"
CLUSTER_NETWORK = "runner-test-cluster"


@pytest.fixture(scope="module")
def cluster_network(docker_client):
    """What a cluster provides between its nodes: here one engine's internal bridge."""
    with contextlib.suppress(docker.errors.NotFound):
        docker_client.networks.get(CLUSTER_NETWORK).remove()
    network = docker_client.networks.create(CLUSTER_NETWORK, driver="bridge", internal=True,
                                            labels={MANAGED_LABEL: "network"})
    yield network.name
    with contextlib.suppress(docker.errors.APIError):
        network.remove()


@pytest.fixture(scope="module")
def two_node_run(docker_client, cpu_base_image, local_slurm, cluster_network, tmp_path_factory):
    """(exit code, run folder, printed output, wall seconds) of one smoke run on two nodes."""
    tmp = tmp_path_factory.mktemp("two-nodes")
    entry = tmp / "gloo-pair"
    shutil.copytree(GLOO_PAIR, entry)
    manifest = yaml.safe_load((entry / "entry.yaml").read_text())
    manifest.update(nodes=2, processes_per_node=1)
    (entry / "entry.yaml").write_text(yaml.safe_dump(manifest))
    keys = generate(tmp / "submit-host-keys")
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out):
        patch.setenv("RUNNER_RESULTS", str(tmp / "results"))
        patch.setenv("RUNNER_SIGNING_KEY", str(keys.private))
        patch.setenv(NETWORK_ENV, cluster_network)
        started = time.monotonic()
        code = main(["reproduce", str(entry), "--smoke", "--no-infer", "--seed", "5", "--slurm",
                     "--partition", local_slurm.pair_partition])
        wall = time.monotonic() - started
    folders = entry_runs(tmp / "results", "gloo-pair")
    assert len(folders) == 1, out.getvalue()
    return code, folders[0], out.getvalue(), wall


def events_of(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]


def test_two_nodes_train_one_run_with_rank_zeros_clock(two_node_run, local_slurm, docker_client, capsys):
    code, folder, out, wall = two_node_run
    result = json.loads((folder / "result.json").read_text())
    logs = {p.name: p.read_text() for p in (folder / "logs").iterdir()}
    assert code == 0 and result["status"] == "complete", (result["incomplete_reason"], out, logs)
    jsonschema.Draft202012Validator(RESULT_SCHEMA).validate(result)
    # One Slurm job on both nodes; the run's runner ran on the first, signed on the submit host.
    assert result["slurm"]["state"] == "COMPLETED" and result["slurm"]["node"] == local_slurm.nodes[0]
    assert (folder / ENVELOPE).is_file()
    # Both ranks joined one process group across the nodes; every rank's log is kept.
    assert "rank 0 of 2 joined" in logs["train.log"] and "rank 1 of 2 joined" in logs["train-rank1.log"]
    assert "route out: no" in logs["train.log"]  # the cluster network reaches nothing else
    assert "started ranks [1]" in logs["node1-agent.log"]
    # One clock: rank 0's launcher stamped the start; rank 0's events drive TTA.
    training = result["training"]
    assert training["launch_stamp"] == "launcher"
    launches = [e for e in events_of(folder) if e["key"] == "launch"]
    assert len(launches) == 1 and launches[0]["origin"] == "runner"
    assert training["reached"] is True and 0 < training["tta_seconds"] < training["wall_seconds"]
    assert training["evaluations"] and all(e["excluded"] for e in training["evaluations"])
    # A fingerprint per node; the node count is recorded and, against a one-node profile, named.
    assert load_fingerprint(folder / "fingerprint.json") and load_fingerprint(folder / "fingerprint-node1.json")
    hardware = result["hardware"]
    assert hardware["nodes"] == 2
    assert hardware["mismatches"] == ["nodes: expected 1, found 2"] and hardware["allowed_mismatch"]
    with capsys.disabled():
        print(f"\ngloo-pair on 2 Slurm nodes (smoke): TTA {training['tta_seconds']:.2f} s, training wall "
              f"{training['wall_seconds']:.1f} s, submit-to-signed {wall:.1f} s")
    # Nothing of the run is left on the engine (the cluster network is the cluster's).
    assert docker_client.containers.list(all=True, filters={"label": f"{LABEL_RUN}={folder.name}"}) == []


def test_every_freeze_pauses_the_rank_on_the_other_node_before_the_evaluation(two_node_run):
    _, folder, _, _ = two_node_run
    events = events_of(folder)
    freezes = [e for e in events if e["key"] == "eval_freeze"]
    assert freezes
    for freeze in freezes:
        # Stamped only after the agent of node 1 confirmed its rank paused (engine state).
        assert freeze["metadata"]["frozen"] is True
        assert freeze["metadata"]["ranks"] == {"0": "paused", "1": "paused"}
    agent_log = (folder / "logs" / "node1-agent.log").read_text()
    assert len(re.findall(r"\] pause: rank 1 paused$", agent_log, re.M)) == len(freezes)
    assert len(re.findall(r"\] unpause: rank 1 running$", agent_log, re.M)) == len(freezes)


PODMAN_CLUSTER_NETWORK = "runner-test-cluster-podman"


@pytest.fixture
def podman_cluster_network():
    """The cluster network of nodes whose engine is Podman: an internal netavark bridge. This
    host's FORWARD policy is DROP (Docker set it), and netavark 1.4 adds no accept rule for
    internal networks, so the site's firewall must let the bridge's own traffic through
    (docs/cluster.md); the rule is removed with the network."""
    import subprocess

    from runner.engine import ensure_engine
    from runner.engine.kinds import ENV_VAR

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV_VAR, "podman")
        ensure_engine(install=True).close()
    subprocess.run(["podman", "network", "rm", "-f", PODMAN_CLUSTER_NETWORK], capture_output=True)
    subprocess.run(["podman", "network", "create", "--internal", PODMAN_CLUSTER_NETWORK], check=True, capture_output=True)
    bridge = subprocess.run(["podman", "network", "inspect", "--format", "{{.NetworkInterface}}", PODMAN_CLUSTER_NETWORK],
                            check=True, capture_output=True, text=True).stdout.strip()
    rule = ["FORWARD", "-i", bridge, "-o", bridge, "-j", "ACCEPT"]
    subprocess.run(["iptables", "-I", *rule], check=True)
    yield PODMAN_CLUSTER_NETWORK
    subprocess.run(["iptables", "-D", *rule], capture_output=True)
    subprocess.run(["podman", "network", "rm", "-f", PODMAN_CLUSTER_NETWORK], capture_output=True)


def test_two_nodes_whose_engine_is_podman_train_one_run(cpu_base_image, local_slurm, podman_cluster_network,
                                                         tmp_path, monkeypatch, capsys):
    """Nodes without a Docker daemon: the node agent starts rank 1 in Podman on the second node,
    both ranks join one process group on the cluster's netavark network, and every freeze
    pauses both."""
    entry = tmp_path / "gloo-pair"
    shutil.copytree(GLOO_PAIR, entry)
    manifest = yaml.safe_load((entry / "entry.yaml").read_text())
    manifest.update(nodes=2, processes_per_node=1)
    (entry / "entry.yaml").write_text(yaml.safe_dump(manifest))
    monkeypatch.setenv("RUNNER_ENGINE", "podman")
    monkeypatch.setenv("RUNNER_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("RUNNER_SIGNING_KEY", str(generate(tmp_path / "keys").private))
    monkeypatch.setenv(NETWORK_ENV, podman_cluster_network)
    code = main(["reproduce", str(entry), "--smoke", "--no-infer", "--seed", "5", "--slurm",
                 "--partition", local_slurm.pair_partition])
    out = capsys.readouterr().out
    (folder,) = entry_runs(tmp_path / "results", "gloo-pair")
    result = json.loads((folder / "result.json").read_text())
    logs = {p.name: p.read_text() for p in (folder / "logs").iterdir()}
    assert code == 0 and result["status"] == "complete", (result["incomplete_reason"], out, logs)
    assert "rank 1 of 2 joined" in logs["train-rank1.log"] and "route out: no" in logs["train.log"]
    assert json.loads((folder / "fingerprint-node1.json").read_text())["docker"]["engine"] == "podman"
    freezes = [e for e in events_of(folder) if e["key"] == "eval_freeze"]
    assert freezes and all(f["metadata"]["ranks"] == {"0": "paused", "1": "paused"} for f in freezes)


DEFAULT_ENTRY = Path(__file__).parent.parent.parent / "entries" / "mnist-cnn-cpu"


def test_the_scaling_study_runs_the_default_entry_on_one_and_two_slurm_nodes(
        docker_client, cpu_base_image, local_slurm, cluster_network, tmp_path, monkeypatch):
    """`runner study scaling --slurm --nodes 1,2`: the default entry (gloo when it has several
    processes) as one Slurm job on one node, then one over both, each a signed run."""
    keys = generate(tmp_path / "submit-host-keys")
    monkeypatch.setenv("RUNNER_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("RUNNER_SIGNING_KEY", str(keys.private))
    monkeypatch.setenv(NETWORK_ENV, cluster_network)
    assert main(["study", "scaling", str(DEFAULT_ENTRY), "--smoke", "--no-infer", "--runs", "1", "--processes", "1",
                 "--nodes", "1,2", "--slurm", "--partition", local_slurm.pair_partition]) == 0
    (study,) = (tmp_path / "results" / "mnist-cnn-cpu" / "studies").glob("scaling-*")
    summary = json.loads((study / "summary.json").read_text())
    (nodes,) = summary["series"]  # the one-host series would be its one-process point alone
    assert nodes["count"] == "nodes" and [p["processes"] for p in nodes["points"]] == [1, 2]
    runs = {r["nodes"]: r for r in summary["runs"]}
    assert set(runs) == {1, 2} and all(r["on_slurm"] and r["status"] == "complete" for r in runs.values())
    two = study / "runs" / runs[2]["run_id"]
    result = json.loads((two / "result.json").read_text())
    assert result["variant"] == {"nodes": 2, "processes_per_node": 1} and result["slurm"]["state"] == "COMPLETED"
    assert result["hardware"]["nodes"] == 2 and "nodes: expected 1, found 2" in result["hardware"]["mismatches"]
    assert (two / ENVELOPE).is_file() and "started ranks [1]" in (two / "logs" / "node1-agent.log").read_text()
    one = json.loads((study / "runs" / runs[1]["run_id"] / "result.json").read_text())
    assert "variant" not in one and one["hardware"]["nodes"] == 1  # the manifest's own placement
    # Rank 0 logged its time in all_reduce; the one-process run has none to log.
    assert len(runs[2]["communication_seconds"]) == 1 and runs[1]["communication_seconds"] == []
    first, second = nodes["points"]
    assert second["epoch_speedup"] == pytest.approx(first["median_epoch_seconds"] / second["median_epoch_seconds"])
    assert (study / "scaling.png").is_file() and (study / "report.html").is_file()
