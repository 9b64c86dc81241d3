"""``runner reproduce --slurm`` against the real local Slurm (the ``local_slurm`` fixture).

Every job is a smoke run of the contract-probe test entry, seconds long: the jobs run the
ordinary ``runner reproduce`` on the node with the real Docker engine, and the submitting
command gathers, marks and signs what they wrote.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest
import yaml

from runner.plan import PLAN_FILE, plan_of_task

from runner.bundle.filelist import ENVELOPE, SIGNER_KEY, read_manifest
from runner.cli import main
from runner.digests import sha256_file
from runner.keys import generate
from runner.results import RESULT_SCHEMA
from runner.results.layout import SMOKE_DIR, entry_runs
from runner.engine.containers import MANAGED_LABEL

pytestmark = [pytest.mark.slurm, pytest.mark.docker]
PROBE = Path(__file__).parent.parent / "entries" / "contract-probe"


@pytest.fixture
def results(tmp_path, monkeypatch):
    folder = tmp_path / "results"
    monkeypatch.setenv("RUNNER_RESULTS", str(folder))
    return folder


@pytest.fixture
def submit_key(tmp_path, monkeypatch):
    """The submit host's key, given by file path; compute nodes never need it."""
    pair = generate(tmp_path / "submit-host-keys")
    monkeypatch.setenv("RUNNER_SIGNING_KEY", str(pair.private))
    return pair


def probe_entry(tmp_path: Path, mode: str) -> Path:
    folder = tmp_path / "contract-probe"
    shutil.copytree(PROBE, folder)
    manifest = yaml.safe_load((folder / "entry.yaml").read_text())
    manifest["train"]["command"] = ["python3", "/entry/probe.py", mode]
    (folder / "entry.yaml").write_text(yaml.safe_dump(manifest))
    return folder


def run_folders(results: Path) -> dict[int, Path]:
    """Seed -> run folder (result folders only: not the job files, not the runs summary)."""
    folders = entry_runs(results, "contract-probe")
    return {json.loads((p / "result.json").read_text())["seed"]: p for p in folders}


def result_of(folder: Path) -> dict:
    return json.loads((folder / "result.json").read_text())


def job_folders(results: Path) -> list[Path]:
    return sorted((results / ".slurm" / "contract-probe").iterdir())


def test_a_job_array_of_smoke_runs_is_gathered_summarised_and_signed_on_the_submit_host(
    docker_client, cpu_base_image, local_slurm, tmp_path, results, submit_key, capsys
):
    entry = probe_entry(tmp_path, "sandbox")
    code = main(["reproduce", str(entry), "--smoke", "--no-infer", "--seed", "0", "--runs", "2", "--slurm",
                 "--partition", local_slurm.partition])
    out = capsys.readouterr().out
    assert code == 0, out
    folders = run_folders(results)
    assert sorted(folders) == [0, 1]  # seeds chosen by the submitter, one per array task
    (jobs,) = job_folders(results)
    assert (jobs / "seeds.txt").read_text() == "0\n1\n"
    # Each task runs the submitter's plan for its seed, and signs nothing (the submit host does).
    assert "--plan" in (jobs / "job.sh").read_text() and (jobs / PLAN_FILE).is_file()
    task = plan_of_task(jobs / PLAN_FILE, 1)
    assert task.seeds == (1,) and task.options.sign is False and task.smoke and not task.options.infer
    job_id = (jobs / "job_id").read_text().strip()
    for index, seed in enumerate((0, 1)):
        result = result_of(folders[seed])
        jsonschema.Draft202012Validator(RESULT_SCHEMA).validate(result)
        assert result["status"] == "complete" and result["smoke"] is True
        assert result["slurm"]["job_id"] == f"{job_id}_{index}"
        assert result["slurm"]["state"] == "COMPLETED"
        assert result["slurm"]["node"] == local_slurm.node
        # Signed here with the submit host's key, over the result.json that names the job.
        signer = json.loads((folders[seed] / SIGNER_KEY).read_text())
        assert signer["keyid"] == submit_key.keyid
        assert (folders[seed] / ENVELOPE).is_file()
        digest = read_manifest(folders[seed])["result.json"]
        assert digest.removeprefix("sha256:") == sha256_file(folders[seed] / "result.json")
    # The same summary as a local --runs 2.
    (summary,) = (results / "contract-probe" / SMOKE_DIR).glob("runs-*.json")  # smoke runs: apart
    assert json.loads(summary.read_text())["runs"] == 2
    assert "0/2 runs reached the threshold" in out


def test_resubmitting_skips_the_runs_already_complete(
    docker_client, cpu_base_image, local_slurm, tmp_path, results, submit_key, capsys
):
    entry = probe_entry(tmp_path, "sandbox")
    flags = ["--smoke", "--no-infer", "--seed", "0", "--slurm"]  # the same seeds each time
    assert main(["reproduce", str(entry), "--runs", "1", *flags]) == 0
    first = run_folders(results)[0]
    signed_before = (first / ENVELOPE).read_bytes()
    capsys.readouterr()
    assert main(["reproduce", str(entry), "--runs", "2", *flags]) == 0
    assert "already complete, not submitted again: seed(s) 0" in capsys.readouterr().out
    assert [(j / "seeds.txt").read_text() for j in job_folders(results)] == ["0\n", "1\n"]
    folders = run_folders(results)
    assert sorted(folders) == [0, 1] and folders[0] == first
    assert (first / ENVELOPE).read_bytes() == signed_before  # not touched again


def wait_for(condition, what: str, proc: subprocess.Popen, timeout: float = 180, task_logs=()):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := condition():
            return value
        assert proc.poll() is None, proc.communicate()[0]
        for log in task_logs:  # a task that ended already will never get there
            assert not log.with_suffix(".exit").exists(), log.read_text()[-2000:]
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_cancelled_job_leaves_an_incomplete_result_naming_the_job_and_its_state(
    docker_client, cpu_base_image, local_slurm, tmp_path, results, submit_key
):
    # Seed 0 starts training and hangs; seed 1's task is held, so it never starts.
    entry = probe_entry(tmp_path, "sleep")
    env = {**os.environ, "RUNNER_RESULTS": str(results)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "runner", "reproduce", str(entry), "--smoke", "--no-infer",
         "--seed", "0", "--runs", "2", "--slurm", "--slurm-arg=--hold"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    job_id = wait_for(lambda: results.joinpath(".slurm").exists() and
                      next(iter(p.read_text().strip() for p in results.glob(".slurm/*/*/job_id")), None),
                      "the submission", proc)
    subprocess.run(["scontrol", "release", f"{job_id}_0"], check=True, capture_output=True)
    wait_for(lambda: any("epoch_start" in log.read_text()
                         for log in results.glob("contract-probe/**/logs/train.log")),
             "seed 0 to start training", proc,
             task_logs=[next(results.glob(".slurm/*/*/job_id")).with_name("task-0.out")])
    subprocess.run(["scancel", job_id], check=True, capture_output=True)
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode == 1, out
    assert "Traceback" not in out
    folders = run_folders(results)
    started, never = result_of(folders[0]), result_of(folders[1])
    # The run that was training: the runner's own record, marked with the job and state.
    assert started["status"] == "incomplete"
    assert started["incomplete_reason"].startswith(f"slurm job {job_id}_0 CANCELLED")
    assert started["slurm"]["state"] == "CANCELLED"
    assert (folders[0] / ENVELOPE).is_file()
    # The task that never started: a placeholder result, so the run is not silently lost.
    assert never["status"] == "incomplete"
    assert never["incomplete_reason"] == f"slurm job {job_id}_1 CANCELLED"
    assert never["training"] is None and never["conforming"] is False
    assert f"slurm job {job_id}_1 CANCELLED" in out
    assert docker_client.containers.list(all=True, filters={"label": MANAGED_LABEL}) == []


def test_without_slurm_tools_the_submission_fails_in_one_line(tmp_path, results, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    entry = probe_entry(tmp_path, "sandbox")
    assert main(["reproduce", str(entry), "--smoke", "--slurm"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "`sbatch` is not on PATH" in err and "Fix:" in err
    assert not results.exists()  # nothing written before the check


def test_drift_rerun_runs_as_a_slurm_job_even_when_the_seed_is_complete(
    docker_client, cpu_base_image, local_slurm, tmp_path, results, submit_key, capsys
):
    entry = probe_entry(tmp_path, "sandbox")
    assert main(["reproduce", str(entry), "--smoke", "--no-infer", "--seed", "0", "--slurm"]) == 0
    archived = run_folders(results)[0]
    capsys.readouterr()
    assert main(["drift", str(archived), "--entry", str(entry), "--rerun", "--slurm"]) == 0
    assert "no drift" in capsys.readouterr().out
    reruns = [p for p in entry_runs(results, "contract-probe") if p != archived]
    (rerun,) = reruns  # a drift rerun measures again: a complete seed is not skipped
    result = result_of(rerun)
    assert result["seed"] == 0 and result["slurm"]["state"] == "COMPLETED"
    assert result["slurm"]["array_job_id"] != result_of(archived)["slurm"]["array_job_id"]


def test_a_job_array_runs_on_nodes_whose_engine_is_podman(
    docker_client, local_slurm, tmp_path, results, submit_key, monkeypatch, capsys
):
    """The nodes' engine is Podman (no Docker daemon needed on them): RUNNER_ENGINE reaches
    the tasks through Slurm's --export=ALL, each task builds and runs in Podman's store, and
    the submit host gathers and signs as for Docker."""
    from runner.engine import ensure_engine

    monkeypatch.setenv("RUNNER_ENGINE", "podman")
    ensure_engine(install=True).close()  # Podman's API service, as `runner setup --engine podman` starts it
    entry = probe_entry(tmp_path, "sandbox")
    code = main(["reproduce", str(entry), "--smoke", "--no-infer", "--seed", "0", "--runs", "2", "--slurm",
                 "--partition", local_slurm.partition])
    out = capsys.readouterr().out
    assert code == 0, out
    folders = run_folders(results)
    assert sorted(folders) == [0, 1]
    for seed in (0, 1):
        result = result_of(folders[seed])
        assert result["status"] == "complete" and result["slurm"]["state"] == "COMPLETED"
        fingerprint = json.loads((folders[seed] / "fingerprint.json").read_text())
        assert fingerprint["docker"]["engine"] == "podman"
        assert json.loads((folders[seed] / SIGNER_KEY).read_text())["keyid"] == submit_key.keyid
