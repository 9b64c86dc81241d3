"""Podman as the engine (issue 27): the same pipeline through Podman's Docker-compatible API
service, rootful, with the runc runtime this cgroup-v1 host needs. Installs Podman when it
is missing (like the Docker engine, through `runner setup`'s code), builds the base image
and the entries' images in Podman's own store, and checks what must hold on either engine:
the lock-down, the freeze, the clock's rules against the cheat entry, and for the default
entry the same scores and checkpoints as Docker for the same seed, a conforming result
and a bundle that verifies."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from runner import keys, paths
from runner.cli import main
from runner.results.layout import entry_runs
from tests.test_reproduce import assert_the_builder_ran_only_after_the_entry, probe_entry

pytestmark = pytest.mark.docker
TESTS = Path(__file__).parent
DEFAULT = paths.repo_root() / "entries" / "mnist-cnn-cpu"


@pytest.fixture(scope="module")
def podman(docker_client):
    """The session's Docker engine stays up; this module's runs go to Podman (the engine; its
    Docker API client is ``podman.client``)."""
    from runner.engine import ensure_engine
    from runner.engine.kinds import ENV_VAR

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV_VAR, "podman")
        engine = ensure_engine(install=True)
        assert engine.facts()["product"] == "Podman Engine"
        yield engine
        engine.close()


def test_the_podman_service_does_not_live_in_the_folder_it_was_started_from(podman):
    """Each container's conmon starts in the service's working directory: a service started
    from a clone that is later deleted could start no container (seen: every Podman run of a
    second clean-clone CI failed to attach, "Failed to get working directory")."""
    import subprocess

    pids = subprocess.run(["pgrep", "-f", "podman system service"], capture_output=True, text=True).stdout.split()
    assert pids, "no Podman API service process"
    assert {os.readlink(f"/proc/{pid}/cwd") for pid in pids} == {"/"}


def _run(entry: Path, results: Path, *options: str, engine: str | None = None) -> dict:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RUNNER_RESULTS", str(results))
        if engine:
            patch.setenv("RUNNER_ENGINE", engine)
        assert main(["reproduce", str(entry), *options]) in (0, 1)
    (folder,) = entry_runs(results, entry.name)
    result = json.loads((folder / "result.json").read_text())
    return result | {"_folder": str(folder)}


def test_the_default_entry_under_podman_matches_docker_conforms_and_verifies(
    podman, tmp_path, monkeypatch, capsys, host_load_is_not_the_subject
):
    pair = keys.generate(tmp_path / "keys")
    monkeypatch.setenv(keys.ENV_VAR, str(pair.private))
    monkeypatch.delenv("RUNNER_HOME", raising=False)  # the shared wheelhouse and staged MNIST
    on_podman = _run(DEFAULT, tmp_path / "podman", "--seed", "0", "--no-loadgen", engine="podman")
    on_docker = _run(DEFAULT, tmp_path / "docker", "--seed", "0", "--no-infer", engine="docker")
    fingerprint = json.loads(Path(on_podman["_folder"], "fingerprint.json").read_text())
    assert fingerprint["docker"]["engine"] == "podman" and fingerprint["docker"]["product"] == "Podman Engine"
    assert on_podman["status"] == "complete" and on_podman["conforming"], on_podman["nonconforming_reasons"]
    # The same seed trains the same network on either engine: every checkpoint and score equal.
    for ran in (on_podman, on_docker):
        assert ran["training"]["reached"]
    same = [(e["checkpoint_sha256"], e["scores"]) for e in on_docker["training"]["evaluations"]]
    assert [(e["checkpoint_sha256"], e["scores"]) for e in on_podman["training"]["evaluations"]] == same
    assert all(b["passed_gate"] for b in on_podman["inference"].values())
    capsys.readouterr()
    assert main(["verify", on_podman["_folder"], "--trusted-keys", str(pair.public)]) in (0, 3)  # verified
    assert "ran on Podman Engine 4." in " ".join(capsys.readouterr().out.split())  # however the terminal wraps


def test_the_lock_down_holds_under_podman(podman, tmp_path, host_load_is_not_the_subject):
    result = _run(probe_entry(tmp_path, "sandbox"), tmp_path / "results", "--smoke", "--no-infer")
    events = [json.loads(line) for line in Path(result["_folder"], "events.jsonl").read_text().splitlines()]
    (probe,) = [e["metadata"] for e in events if e["key"] == "sandbox_probe"]
    assert probe["network"] is False and probe["uid"] == 1000 and int(probe["cap_eff"], 16) == 0
    assert (probe["write_root"], probe["write_data"]) == (False, False)
    assert (probe["write_output"], probe["write_scratch"]) == (True, True)
    assert probe["cpus"] == 2
    assert [f for f in probe["files"] if f.endswith(".npy")] == ["/data/train/images.npy", "/data/train/labels.npy"]
    assert result["training"]["launch_stamp"] == "launcher"


def test_the_freeze_stops_the_entry_and_its_evaluator_under_podman(podman, tmp_path):
    result = _run(probe_entry(tmp_path, "twice", "tiny:build_with_heartbeat"), tmp_path / "results",
                  "--smoke", "--no-infer", "--seed", "3")
    assert_the_builder_ran_only_after_the_entry(result)
    assert all(e["excluded"] for e in result["training"]["evaluations"])


def test_the_clock_cheat_loses_under_podman_as_under_docker(podman, tmp_path):
    """tests/entries/cheat-clock (classes 1 and 2): work before run_start counts, and the
    entry's own declared evaluation window excludes nothing."""
    result = _run(TESTS / "entries" / "cheat-clock", tmp_path / "results", "--smoke")
    training = result["training"]
    assert training["launch_stamp"] == "launcher" and training["reached"]
    assert training["tta_seconds"] >= 4.0
    (evaluation,) = training["evaluations"]
    events = [json.loads(line) for line in Path(result["_folder"], "events.jsonl").read_text().splitlines()]
    (declared_stop,) = [e for e in events if e["origin"] == "entry" and e["key"] == "eval_stop"]
    assert evaluation["excluded"] and evaluation["start"] > declared_stop["t"]


def test_orphans_of_a_killed_runner_are_swept_under_podman(podman):
    from runner.engine.containers import MANAGED_LABEL, remove_orphans
    from runner.engine.labels import LABEL_HOST, LABEL_PID, LABEL_PID_START, me

    image = podman.client.images.list(name="runner/base")[0].id
    gone = {MANAGED_LABEL: "train", LABEL_PID: "999999", LABEL_PID_START: "1", LABEL_HOST: me().host}
    from runner.engine.docker_api import create_options

    container = podman.client.containers.create(image, command=["true"], labels=gone,
                                                **create_options(podman.kind))
    assert remove_orphans(podman) >= 1
    assert container.id not in {c.id for c in podman.client.containers.list(all=True)}


def test_an_engine_that_cannot_freeze_is_refused():
    """Rootless on cgroup v1: no freezer, so no run (never a silently weaker one)."""
    from runner.engine.docker_api import refusal

    assert "cannot pause containers" in refusal({"SecurityOptions": ["name=rootless"], "CgroupVersion": "1"}, "podman")
    assert refusal({"SecurityOptions": ["name=rootless"], "CgroupVersion": "2"}, "podman") is None
    assert refusal({"SecurityOptions": ["name=seccomp,profile=default"], "CgroupVersion": "1"}, "podman") is None


def test_two_processes_train_on_podman_over_rank_zeros_loopback(podman, tmp_path):
    """Podman 4.3's internal networks drop traffic between containers on a host where Docker
    set the FORWARD policy to DROP (this one): the ranks share rank 0's network namespace
    instead, and reach each other on loopback and nothing else, on either engine."""
    result = _run(TESTS / "entries" / "gloo-pair", tmp_path / "results", "--smoke", "--no-infer", engine="podman")
    logs = {p.name: p.read_text() for p in (Path(result["_folder"]) / "logs").iterdir()}
    assert result["status"] == "complete", (result["incomplete_reason"], logs)
    assert "rank 1 of 2 joined" in logs["train-rank1.log"] and "route out: no" in logs["train.log"]
    evaluations = result["training"]["evaluations"]
    assert evaluations and all(e["excluded"] and e["problem"] is None for e in evaluations)
    assert podman.client.containers.list(all=True, filters={"name": f"runner-{Path(result['_folder']).name}".lower()}) == []
