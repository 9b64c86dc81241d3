"""Hostile behaviour at run time, against the real engine: output that used to kill the
listener or stall the reader, containers of other runs, a killed runner, a full /output,
runs that share cores. The whole-run cases use the contract-probe test entry with
--smoke, so each costs seconds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import docker.errors
import pytest
from hostile_helpers import (  # noqa: F401
    assert_one_line_error,
    event_keys,
    probe_entry,
    result_of,
    results,
    run_cli,
)

from runner.images import ensure_base
from runner.run import container as run_container_mod
from runner.run import contention, ownership
from runner.run.container import MANAGED_LABEL, ContainerSpec, remove_orphans, run_container
from runner.run.cores import hold_cores
from runner.events import MAX_EVENTS, parse_line, read_events

pytestmark = pytest.mark.docker
CPU_BASE = "python3.11-bookworm"


# --- events: limits in parse_line ----------------------------------------------------

GOOD = ':::MLLOG {"key": "epoch_start", "metadata": {"epoch_num": 1}}'


@pytest.mark.parametrize("line", [
    ':::MLLOG {"key": "x", "value": ' + "[" * 200_000 + "]" * 200_000 + "}",
    ':::MLLOG {"key": "x", "value": ' + "[" * 40 + "]" * 40 + "}",
    ':::MLLOG {"key": "x", "value": ' + "7" * 5000 + "}",
    ':::MLLOG {"key": "x", "value": "' + "y" * 70_000 + '"}',
    ':::MLLOG {"key": "x", "value": NaN}',
    ':::MLLOG {"key": "x", "value": -Infinity}',
])
def test_hostile_mllog_lines_are_ignored_and_the_next_one_parses(line):
    assert parse_line(line, 0, 1.0) is None
    assert parse_line(GOOD, 1, 2.0).metadata == {"epoch_num": 1}


def test_event_count_is_capped():
    assert parse_line(GOOD, MAX_EVENTS - 1, 1.0) is not None
    assert parse_line(GOOD, MAX_EVENTS, 1.0) is None


def test_read_events_refuses_deep_nesting_with_a_value_error(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text('{"key": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    with pytest.raises(ValueError):
        read_events(path)


# --- the output reader -------------------------------------------------------------

@pytest.fixture(scope="module")
def base_tag(docker_client):
    return ensure_base(CPU_BASE, docker_client).tag


def test_a_huge_line_without_newline_is_read_in_linear_time(docker_client, base_tag, tmp_path):
    script = ("import sys; sys.stdout.write('x' * (96 << 20)); sys.stdout.flush(); "
              "print(); print(':::MLLOG {\"key\": \"after\"}', flush=True)")
    seen: list[str] = []
    spec = ContainerSpec(base_tag, ["python3", "-c", script], [], timeout_s=60, label="hostile-test")
    outcome = run_container(docker_client, spec, lambda line, t: seen.append(line[:200]), tmp_path / "out.log")
    # The quadratic reader needed minutes for this and hit the 60 s timeout.
    assert not outcome.timed_out and outcome.exit_code == 0, outcome
    assert seen[-1] == ':::MLLOG {"key": "after"}'
    assert "more bytes cut by the runner" in (tmp_path / "out.log").read_text()[-200_000:]


def test_a_failing_line_consumer_does_not_stop_the_reader(docker_client, base_tag, tmp_path):
    seen: list[str] = []

    def consume(line, t):
        seen.append(line)
        if line == "boom":
            raise RuntimeError("consumer bug")

    spec = ContainerSpec(base_tag, ["sh", "-c", "echo a; echo boom; echo c; echo d"], [], timeout_s=60,
                         label="hostile-test")
    outcome = run_container(docker_client, spec, consume, tmp_path / "out.log")
    assert seen == ["a", "boom", "c", "d"]
    assert "consumer bug" in (outcome.error or "")  # said, not swallowed
    assert outcome.reason() == "output stream failed: consumer bug"


# --- containers of other runs --------------------------------------------------------

def _container(client, base_tag, labels):
    return client.containers.run(base_tag, ["sleep", "120"], detach=True, labels=labels,
                                 network_mode="none")


def _dead_pid() -> tuple[int, str]:
    proc = subprocess.Popen(["true"])
    start = ownership.process_start(proc.pid) or "1"
    proc.wait()
    return proc.pid, start


def test_remove_orphans_removes_only_provable_orphans(docker_client, base_tag):
    me = ownership.me()
    dead_pid, dead_start = _dead_pid()

    def owner(pid, start, host=me.host, run="hostile-test"):
        return {MANAGED_LABEL: "train", ownership.LABEL_PID: str(pid), ownership.LABEL_PID_START: start,
                ownership.LABEL_HOST: host, ownership.LABEL_RUN: run}

    cases = {
        "dead runner": (owner(dead_pid, dead_start), False),
        "pid reused by another process": (owner(me.pid, "12345"), False),
        "live run (this process)": (owner(me.pid, me.pid_start), True),
        "live run on another host": (owner(dead_pid, dead_start, host="some-other-host"), True),
        "managed label without owner": ({MANAGED_LABEL: "train"}, True),
        "foreign container": ({"org.example": "x"}, True),
    }
    made = {name: _container(docker_client, base_tag, labels) for name, (labels, _) in cases.items()}
    try:
        remove_orphans(docker_client)
        ids = {c.id for c in docker_client.containers.list(all=True)}
        kept = {name: c.id in ids for name, c in made.items()}
        assert kept == {name: keep for name, (_, keep) in cases.items()}
    finally:
        for c in made.values():
            try:
                c.remove(force=True)
            except docker.errors.APIError:  # already removed (or being removed)
                pass


def test_containers_carry_owner_labels(docker_client, base_tag, tmp_path):
    seen = []
    spec = ContainerSpec(base_tag, ["sh", "-c", "echo hi"], [], timeout_s=60, label="hostile-test")
    real_create = run_container_mod._create

    def spy(client, s):
        c = real_create(client, s)
        seen.append(c.labels)
        return c

    run_container_mod._create = spy
    try:
        run_container(docker_client, spec, lambda line, t: None, tmp_path / "out.log")
    finally:
        run_container_mod._create = real_create
    (labels,) = seen
    assert labels[ownership.LABEL_PID] == str(os.getpid())
    assert labels[ownership.LABEL_PID_START] == ownership.process_start(os.getpid())
    assert labels[ownership.LABEL_HOST] == ownership.me().host


# --- the core lock and contention ----------------------------------------------------

def test_a_second_holder_waits_for_the_cores_and_names_the_holder(tmp_path, monkeypatch):
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path / "home"))
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from runner.run.cores import hold_cores\n"
         "with hold_cores(2, print, 'holder-entry'):\n"
         "    print('held', flush=True); sys.stdin.readline()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env={**os.environ},
    )
    assert holder.stdout.readline().strip() == "held"
    said: list[str] = []
    got = threading.Event()

    def second():
        with hold_cores(2, said.append, "second"):
            got.set()

    t = threading.Thread(target=second, daemon=True)
    t.start()
    time.sleep(1.5)
    assert not got.is_set()
    assert said == [f"waiting for cores 0-1 held by run holder-entry (pid {holder.pid})"]
    holder.stdin.write("\n")
    holder.stdin.flush()
    holder.wait(timeout=30)
    t.join(timeout=10)
    assert got.is_set()


def test_steal_is_read_per_cpu_from_proc_stat(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  1 1 1 1 1 1 1 1 0 0\ncpu0 10 0 10 70 0 0 0 10 0 0\ncpu1 50 0 50 0 0 0 0 0 0 0\n")
    assert contention.cpu_times([0], stat) == (10, 100)
    assert contention.cpu_times([0, 1], stat) == (10, 200)
    assert contention.parse_cpuset("0-2,5") == [0, 1, 2, 5]


def test_busy_neighbours_on_the_cpuset_are_measured():
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(4)]
    try:
        sampler = contention.ContentionSampler("0-1", interval_s=0.2).start()
        deadline = time.monotonic() + 20  # a loaded host starves the sampler too
        while sampler.samples_taken < 5 and time.monotonic() < deadline:
            time.sleep(0.2)
        summary = sampler.stop()
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert summary.samples >= 5 and summary.other_runnable_per_cpu >= 1.0
    assert "CPU contention" in summary.problem()


# --- whole runs (contract-probe, --smoke) ------------------------------------------------

def _no_run_containers(client, result: dict) -> bool:
    run_id = Path(result["_folder"]).name
    return client.containers.list(all=True, filters={"label": f"{ownership.LABEL_RUN}={run_id}"}) == []


@pytest.fixture(scope="module")
def hostile_run(docker_client, tmp_path_factory):
    """One run of the probe's ``hostile`` mode; several cases check what it left."""
    tmp = tmp_path_factory.mktemp("hostile-run")
    results_dir = tmp / "results"
    env = {**os.environ, "RUNNER_RESULTS": str(results_dir)}
    proc = subprocess.run(
        [sys.executable, "-m", "runner", "reproduce", str(probe_entry(tmp, "hostile")), "--smoke", "--no-infer"],
        env=env, capture_output=True, text=True, timeout=600,
    )
    return proc, result_of(results_dir)


def test_hostile_output_does_not_kill_the_listener(hostile_run):
    proc, result = hostile_run
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    keys = event_keys(result)
    assert keys.count("eval_request") == 3 and keys[-1] == "container_exit"  # nothing after the bad lines lost
    assert "run_stop" in keys  # it may arrive while the last evaluation is frozen


def test_nul_byte_in_a_checkpoint_path_is_a_clean_problem(hostile_run):
    proc, result = hostile_run
    first = result["training"]["evaluations"][0]
    assert "control characters" in first["problem"] and not first["meets"]
    assert result["status"] == "complete" and proc.returncode == 0  # unscored, not a crash


def test_a_file_claiming_eight_terabytes_is_a_clean_problem(hostile_run):
    _, result = hostile_run
    second = result["training"]["evaluations"][1]
    assert second["problem"] and second["count"] is None
    assert result["training"]["evaluations"][2]["problem"] is None


def test_ignored_lines_are_counted_in_the_result(hostile_run):
    _, result = hostile_run
    reasons = " ".join(result["nonconforming_reasons"])
    assert "MLLOG lines ignored" in reasons and "line longer than 64 KiB" in reasons
    assert "JSON nested" in reasons and "5000 digits" in reasons


def test_no_container_is_left_after_the_hostile_run(docker_client, hostile_run):
    assert _no_run_containers(docker_client, hostile_run[1])


def test_output_quota_stops_the_run(docker_client, tmp_path, capsys, results, monkeypatch):
    monkeypatch.setenv("RUNNER_OUTPUT_QUOTA_GIB", "0.02")  # ~20 MB
    code, out, err = run_cli(capsys, "reproduce", str(probe_entry(tmp_path, "fill")), "--smoke", "--no-infer")
    result = result_of(results)
    assert code == 1 and "Traceback" not in out + err
    assert result["status"] == "incomplete" and "exceeded its quota" in result["incomplete_reason"]
    size = (Path(result["_folder"]) / "output" / "fill.bin").stat().st_size
    assert size < 400 << 20  # stopped within seconds, not at 4 GiB
    assert _no_run_containers(docker_client, result)


def test_read_only_results_folder_is_one_line(docker_client, tmp_path, capsys, monkeypatch):
    ro = tmp_path / "ro-results"
    ro.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(ro)], check=True)
    try:
        monkeypatch.setenv("RUNNER_RESULTS", str(ro))
        code, out, err = run_cli(capsys, "reproduce", str(probe_entry(tmp_path, "sandbox")), "--smoke", "--no-infer")
        assert_one_line_error(code, out, err, "Read-only file system", str(ro))
    finally:
        subprocess.run(["umount", "-l", str(ro)], check=False)


def _wait_for(path_glob, results_dir: Path, text: str, proc, seconds=300) -> Path:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for log in results_dir.glob(path_glob):
            if text in log.read_text(errors="replace"):
                return log
        assert proc.poll() is None, proc.communicate()[0]
        time.sleep(0.2)
    raise AssertionError(f"{text} never appeared")


def test_sigkilled_runner_is_recovered_at_next_start(docker_client, tmp_path, capsys, monkeypatch):
    first_results = tmp_path / "first"
    env = {**os.environ, "RUNNER_RESULTS": str(first_results)}
    killed = subprocess.Popen(
        [sys.executable, "-m", "runner", "reproduce", str(probe_entry(tmp_path / "a", "sleep")), "--smoke",
         "--no-infer"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    _wait_for("contract-probe/*/logs/train.log", first_results, "epoch_start", killed)
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=30)
    orphan = result_of(first_results)
    assert orphan["status"] == "running" and not _no_run_containers(docker_client, orphan)  # still training

    monkeypatch.setenv("RUNNER_RESULTS", str(tmp_path / "second"))
    code, out, err = run_cli(capsys, "reproduce", str(probe_entry(tmp_path / "b", "sandbox")), "--smoke", "--no-infer")
    assert code == 0 and "Traceback" not in out + err
    joined = " ".join(out.split())
    assert "removed 1 container(s) left by an earlier, killed run" in joined
    recovered = result_of(first_results)
    assert (recovered["status"], recovered["incomplete_reason"]) == ("incomplete", ownership.KILLED_REASON)
    assert _no_run_containers(docker_client, recovered)
    assert (Path(recovered["_folder"]) / "logs" / "train.log").read_text()  # nothing written earlier lost


def test_concurrent_runs_queue_for_cores_and_never_kill_each_other(docker_client, tmp_path, capsys, monkeypatch):
    first_results = tmp_path / "first"
    env = {**os.environ, "RUNNER_RESULTS": str(first_results)}
    first = subprocess.Popen(
        [sys.executable, "-m", "runner", "reproduce", str(probe_entry(tmp_path / "a", "sleep")), "--smoke",
         "--no-infer"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    _wait_for("contract-probe/*/logs/train.log", first_results, "epoch_start", first)
    first_run = Path(result_of(first_results)["_folder"]).name
    second_results = tmp_path / "second"
    second = subprocess.Popen(
        [sys.executable, "-m", "runner", "reproduce", str(probe_entry(tmp_path / "b", "sandbox")), "--smoke",
         "--no-infer"], env={**env, "RUNNER_RESULTS": str(second_results), "COLUMNS": "300"},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    lines = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        line = second.stdout.readline()
        lines.append(line)
        if "waiting for cores" in line or not line:
            break
    assert f"waiting for cores 0-1 held by run {first_run} (pid {first.pid})" in lines[-1], lines
    # The second run started (and passed its orphan sweep) without touching the first.
    assert not _no_run_containers(docker_client, result_of(first_results))
    assert result_of(first_results)["status"] == "running"
    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=60) == 130
    rest = second.communicate(timeout=300)[0]
    assert second.returncode == 0, rest
    assert result_of(second_results)["status"] == "complete"
    assert result_of(first_results)["incomplete_reason"] == "interrupted"
