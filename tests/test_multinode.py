"""Runs spanning nodes, the parts that need neither Docker nor Slurm: where such a run may
start, and the runner's side of the control channel with its node agents (played here by
small fake agents: ready, confirmed pauses, a lost agent, a stranger without the token).
The real thing, two slurmd nodes and the gloo-pair entry, is tests/slurm/test_slurm_two_nodes.py."""

from __future__ import annotations

import shutil
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from runner.cli import main
from runner.errors import UserError
from runner.run.allocation import NETWORK_ENV, check_nodes
from runner.run.control import Channel, connect
from runner.run.multiprocess import rank_env
from runner.run.remote_nodes import NodeError, RemoteNodes

GLOO_PAIR = Path(__file__).parent / "entries" / "gloo-pair"

# A node agent that follows the protocol: ready, then pause/unpause confirmed, finish.
FAKE_AGENT = """
import os, sys
from runner.run.control import connect
channel = connect(sys.argv[1], os.environ["RUNNER_AGENT_TOKEN"], 1)
plan = channel.receive()["plan"]
channel.send(kind="ready", fingerprint={"host": {"hostname": "fake"}}, image=plan["image"], data_digest="d")
mode = sys.argv[2]
if mode == "vanish":
    sys.exit(0)
while (order := channel.receive()) is not None:
    if order["do"] in ("pause", "unpause"):
        if mode == "silent":
            continue
        state = "paused" if order["do"] == "pause" else "running"
        channel.send(kind="ack", id=order["id"], states={"1": state})
    elif order["do"] == "finish":
        channel.send(kind="finished", outcomes={"1": None})
        break
"""


def two_node_entry(tmp_path: Path) -> Path:
    folder = tmp_path / "gloo-pair"
    shutil.copytree(GLOO_PAIR, folder)
    manifest = yaml.safe_load((folder / "entry.yaml").read_text())
    manifest.update(nodes=2, processes_per_node=1)
    (folder / "entry.yaml").write_text(yaml.safe_dump(manifest))
    return folder


@pytest.fixture
def no_slurm_job(monkeypatch):
    for name in ("SLURM_JOB_ID", "SLURM_JOB_NUM_NODES", "SLURM_NNODES", NETWORK_ENV):
        monkeypatch.delenv(name, raising=False)


def test_torchruns_variables_across_nodes():
    env = rank_env({}, "runner-x", 3, 4, per_node=2, across_nodes=True)
    assert (env["RANK"], env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"], env["GROUP_RANK"]) == ("3", "1", "2", "1")
    assert env["MASTER_ADDR"] == "runner-x-rank0" and env["WORLD_SIZE"] == "4"


def test_a_run_spanning_nodes_starts_only_inside_a_slurm_allocation_of_them(no_slurm_job, monkeypatch):
    check_nodes(1)  # one node: anywhere
    with pytest.raises(UserError, match=r"asks for 2 nodes.*Fix: submit it with `runner reproduce ENTRY --slurm`"):
        check_nodes(2)
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", "3")
    with pytest.raises(UserError, match="asks for 2 nodes but this Slurm job has 3.*--nodes=2"):
        check_nodes(2)
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", "2")
    with pytest.raises(UserError, match=f"{NETWORK_ENV} names none"):
        check_nodes(2)
    monkeypatch.setenv(NETWORK_ENV, "cluster-net")
    check_nodes(2)


def test_reproducing_a_two_node_entry_here_fails_in_one_line(no_slurm_job, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RUNNER_RESULTS", str(tmp_path / "results"))
    assert main(["reproduce", str(two_node_entry(tmp_path)), "--smoke"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--slurm" in err
    assert not (tmp_path / "results").exists()


def test_submitting_a_two_node_entry_without_a_cluster_network_fails_in_one_line(
    no_slurm_job, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("RUNNER_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    (tmp_path / "bin").mkdir()
    for tool in ("sbatch", "squeue", "scontrol"):  # stand-ins: nothing may be submitted
        (tmp_path / "bin" / tool).write_text("#!/bin/sh\necho should not run >&2; exit 1\n")
        (tmp_path / "bin" / tool).chmod(0o755)
    assert main(["reproduce", str(two_node_entry(tmp_path)), "--smoke", "--slurm"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{NETWORK_ENV} names none" in err


def nodes_with(mode: str, tmp_path: Path, failures: list) -> RemoteNodes:
    return RemoteNodes(
        2, {"image": "sha256:x"}, lambda who, why: failures.append((who, why)), [], tmp_path / "srun.log",
        command=lambda address: [sys.executable, "-c", FAKE_AGENT, address, mode],
    )


def test_a_freeze_counts_only_once_every_node_confirmed_it(tmp_path):
    failures: list = []
    remote = nodes_with("follow", tmp_path, failures)
    try:
        ready = remote.open(timeout_s=60)
        assert ready[1]["fingerprint"] == {"host": {"hostname": "fake"}} and ready[1]["image"] == "sha256:x"
        remote.start()
        assert remote.each("pause") == {1: "paused"}
        assert remote.each("unpause") == {1: "running"}
        assert remote.stop(grace_s=5) is None
    finally:
        remote.close()
    assert failures == []
    # An agent that never answers: the freeze is not confirmed (its time will count).
    remote = nodes_with("silent", tmp_path, failures)
    try:
        remote.open(timeout_s=60)
        remote.start()
        assert remote.each("pause", timeout_s=1) is None
    finally:
        remote.close()


def test_a_lost_node_agent_stops_the_run_with_its_node_named(tmp_path):
    failures: list = []
    stopped = threading.Event()
    remote = nodes_with("vanish", tmp_path, failures)
    remote.on_failure = lambda who, why: (failures.append((who, why)), stopped.set())
    try:
        remote.open(timeout_s=60)
        remote.start()  # the agent is gone by now or soon: rank 0 is told to stop
        assert stopped.wait(10)
        assert failures == [("node 1", "its node agent disconnected")]
        assert remote.stop(grace_s=1) == "node 1: its node agent disconnected"
    finally:
        remote.close()


def test_an_agent_that_cannot_prepare_refuses_the_run_before_it_starts(tmp_path):
    failing = FAKE_AGENT.replace('channel.send(kind="ready"', 'channel.send(kind="failed", why="no GPU driver"); sys.exit(1)\nchannel.send(kind="ready"')
    remote = RemoteNodes(2, {"image": "x"}, None, [], tmp_path / "srun.log",
                         command=lambda address: [sys.executable, "-c", failing, address, "follow"])
    with pytest.raises(NodeError, match="node 1: no GPU driver"):
        remote.open(timeout_s=60)
    remote.close()


def test_a_connection_without_the_runs_token_is_dropped(tmp_path):
    remote = RemoteNodes(2, {"image": "x"}, None, [], tmp_path / "srun.log",
                         command=lambda address: [sys.executable, "-c", "import time; time.sleep(3)"])
    refused: list = []

    def bring_up() -> None:
        try:
            remote.open(timeout_s=2)
        except NodeError as err:
            refused.append(str(err))

    opener = threading.Thread(target=bring_up, daemon=True)
    opener.start()
    try:
        while remote.proc is None:
            time.sleep(0.05)
        port = remote.server.getsockname()[1]
        stranger: Channel = connect(f"127.0.0.1:{port}", "not-the-token", 1)
        assert stranger.receive() is None  # no plan: the runner hung up
        stranger.close()
        opener.join(10)
        assert refused == ["node(s) [1] not ready within 2 s"]
    finally:
        remote.close()


class FakePeers:
    """A node's ranks as the agent drives them (the real ``Peers`` needs the engine)."""

    def __init__(self):
        self.cancel = threading.Event()
        self.outcomes = {}
        self.actions: list[str] = []

    def start(self):
        self.actions.append("start")

    def wait_running(self):
        return True

    def each(self, action):
        self.actions.append(action)
        return {1: "paused" if action == "pause" else "running"}

    def stop(self, grace_s):
        from runner.engine.containers import ContainerOutcome

        self.outcomes = {1: ContainerOutcome(0, False, False, 1.0)}


def _one_run_plan(tmp_path):
    """The plan a node agent is sent: one run of the default entry (one process per node)."""
    from runner.options import ReproduceOptions
    from runner.plan import RunData, make_plan

    entry = Path(__file__).resolve().parents[1] / "entries" / "mnist-cnn-cpu"
    return make_plan(entry, ReproduceOptions(seed=1)).resolved(
        gpus=0, backends=(), image="img", data=RunData(tmp_path, tmp_path, "sha256:0")).for_run(1, tmp_path, tmp_path)


def test_a_node_agent_starts_pauses_and_finishes_its_ranks_when_told(tmp_path):
    import socket

    from runner.run.node_agent import NodeAgent

    ours, theirs = socket.socketpair()
    runner_side = Channel(ours)
    agent = NodeAgent(Channel(theirs), _one_run_plan(tmp_path), 1, tmp_path)
    (tmp_path / "logs").mkdir()
    agent.peers = FakePeers()
    ended: list = []
    thread = threading.Thread(target=lambda: ended.append(agent.serve()), daemon=True)
    thread.start()
    runner_side.send(do="start")
    assert runner_side.receive() == {"kind": "started"}
    runner_side.send(do="pause", id=4)
    assert runner_side.receive() == {"kind": "ack", "id": 4, "states": {"1": "paused"}}
    runner_side.send(do="unpause", id=5)
    assert runner_side.receive() == {"kind": "ack", "id": 5, "states": {"1": "running"}}
    runner_side.send(do="finish", grace_s=1)
    assert runner_side.receive() == {"kind": "finished", "outcomes": {"1": None}}
    thread.join(5)
    assert ended == [0] and agent.peers.actions == ["start", "pause", "unpause"]
    log = (tmp_path / "logs" / "node1-agent.log").read_text()
    assert "pause: rank 1 paused" in log and "unpause: rank 1 running" in log


def test_a_node_agent_that_loses_its_runner_cancels_its_ranks(tmp_path):
    import socket

    from runner.run.node_agent import NodeAgent

    ours, theirs = socket.socketpair()
    agent = NodeAgent(Channel(theirs), _one_run_plan(tmp_path), 1, tmp_path)
    (tmp_path / "logs").mkdir()
    agent.peers = FakePeers()
    ours.close()
    assert agent.serve() == 1 and agent.peers.cancel.is_set()
    assert "lost the runner: cancelling" in (tmp_path / "logs" / "node1-agent.log").read_text()
