"""Issue 46, items 5 and 6: engine calls with time-outs and words, and studies that survive one
bad run. The real CLI in-process; the engine cases need no engine (a socket that accepts and
never answers, a malformed DOCKER_HOST, no socket), the study cases read synthetic runs
(``tests/synthetic_result.py``)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest
from hostile_helpers import DEFAULT_ENTRY, assert_one_line_error, run_cli
from synthetic_result import edit_result, make_result_folder, stage_mnist_stand_in

from runner.fingerprint import capture_host
from runner.manifest import load_entry
from runner.results import assemble
from runner.study import scaling

ENTRY = "mnist-cnn-cpu"


@pytest.fixture
def engine_env(tmp_path, monkeypatch):
    """A fresh runner home (no engine chosen there) and docker as the engine."""
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("RUNNER_ENGINE", raising=False)
    return tmp_path


@pytest.fixture
def silent_socket(tmp_path):
    """A unix socket that accepts every connection and never answers (each is closed after
    20 s, so code without a time-out fails the timing below instead of hanging the suite)."""
    path = tmp_path / "silent.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(16)
    server.settimeout(0.2)
    held: list[tuple[float, socket.socket]] = []
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                held.append((time.monotonic(), conn))
            except OSError:
                pass
            for stamp, conn in list(held):
                if time.monotonic() - stamp > 20:
                    conn.close()
                    held.remove((stamp, conn))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield path
    stop.set()
    thread.join()
    for _, conn in held:
        conn.close()
    server.close()


def test_a_silent_engine_socket_fails_the_build_in_seconds_naming_it(engine_env, silent_socket, capsys,
                                                                      monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{silent_socket}")
    start = time.monotonic()
    code, out, err = run_cli(capsys, "build", str(DEFAULT_ENTRY))
    took = time.monotonic() - start
    line = assert_one_line_error(code, out, err, f"DOCKER_HOST=unix://{silent_socket}", "Docker",
                                 "did not answer in 5 s", "running and not hung")
    assert took < 10, (took, line)
    # Reading results needs no engine at all.
    start = time.monotonic()
    code, out, err = run_cli(capsys, "ls", "--results", str(engine_env / "results"))
    assert code == 0 and "Traceback" not in err and time.monotonic() - start < 5, (code, err)


def test_a_malformed_docker_host_is_named_not_sent_to_setup(engine_env, capsys, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "foo://bar")
    start = time.monotonic()
    code, out, err = run_cli(capsys, "build", str(DEFAULT_ENTRY))
    line = assert_one_line_error(code, out, err, "DOCKER_HOST=foo://bar is malformed", "unset DOCKER_HOST",
                                 "unix:///var/run/docker.sock")
    assert "runner setup" not in line
    assert time.monotonic() - start < 5


def test_setup_with_a_malformed_docker_host_says_so_too(engine_env, capsys, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "foo://bar")
    code, out, err = run_cli(capsys, "setup", "--no-install")
    line = assert_one_line_error(code, out, err, "DOCKER_HOST=foo://bar is malformed")
    assert "sudo runner setup" not in line


@pytest.mark.parametrize("make, needle", [
    (lambda folder: folder / "none.sock", "there is no socket at"),
    (lambda folder: (folder / "plain").write_text("x") and folder / "plain", "is not a socket"),
])
def test_a_docker_host_socket_that_is_not_there_is_named(engine_env, capsys, monkeypatch, make, needle):
    target = make(engine_env)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{target}")
    code, out, err = run_cli(capsys, "build", str(DEFAULT_ENTRY))
    assert_one_line_error(code, out, err, f"DOCKER_HOST=unix://{target}", needle, "correct DOCKER_HOST")


# -- studies ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Two complete synthetic runs of the default entry (different seeds), and the home they
    were staged in."""
    root = tmp_path_factory.mktemp("study")
    home, results = root / "home", root / "results"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RUNNER_HOME", str(home))
        staged = stage_mnist_stand_in(home)
        fingerprint = capture_host()
        first = make_result_folder(results / ENTRY / "20261122T010203Z-s0-aaaaaa", staged, fingerprint)
        second = make_result_folder(results / ENTRY / "20261123T010203Z-s5-bbbbbb", staged, fingerprint, seed=5,
                                    pace=1.2)
    for folder in (first, second):
        edit_result(folder, conforming=True, nonconforming_reasons=[])
    return root, home, first, second


@pytest.fixture
def study_home(two_runs, tmp_path, monkeypatch):
    root, home, first, second = two_runs
    monkeypatch.setenv("RUNNER_HOME", str(home))
    monkeypatch.setenv("RUNNER_RESULTS", str(tmp_path / "results"))  # the study folders go there
    return tmp_path


def failed_slurm_task(entry_dir: Path, name: str) -> Path:
    """The placeholder ``runner.slurm.gather`` leaves for a Slurm task that never ran the
    entry: a result.json saying so, and no events.jsonl."""
    folder = entry_dir / name
    folder.mkdir(parents=True)
    result = assemble.placeholder(run_id=name, entry=load_entry(DEFAULT_ENTRY), seed=9, smoke=False,
                                  reason="the Slurm job ended before the run wrote a result")
    assemble.gathered(result, {"job_id": "4242_1", "array_job_id": "4242", "array_index": 1, "state": "FAILED",
                               "node": "n2", "log": "/tmp/task-1.out"})
    result.write(folder)
    return folder


def test_a_failed_slurm_task_is_reported_and_the_scaling_study_goes_on(two_runs, study_home):
    _, _, first, second = two_runs
    failed = failed_slurm_task(study_home / "results" / ENTRY, "20261124T010203Z-s9-cccccc")
    assert not (failed / "events.jsonl").exists()
    start = time.monotonic()
    out = scaling.present(scaling.study(load_entry(DEFAULT_ENTRY), [first, failed, second]))
    assert time.monotonic() - start < 30
    runs = {r["run_id"]: r for r in out.summary["runs"]}
    assert runs[failed.name]["status"] != "complete"
    assert "4242_1 FAILED" in runs[failed.name]["failed"]
    assert any(failed.name in note and "FAILED" in note for note in out.notes)
    (point,) = [p for s in out.summary["series"] for p in s["points"]]
    assert point["complete_runs"] == 2  # the others are measured
    assert (out.folder / "summary.json").is_file()


def test_the_scaling_cli_exits_non_zero_but_writes_the_study(two_runs, study_home, capsys):
    _, _, first, second = two_runs
    failed = failed_slurm_task(study_home / "results" / ENTRY, "20261124T010203Z-s9-dddddd")
    code, out, err = run_cli(capsys, "study", "scaling", str(DEFAULT_ENTRY), "--from-runs", str(first),
                             str(failed), str(second))
    assert code == 1, (code, out, err)
    assert "Traceback" not in out + err
    assert "1 of 3 runs did not complete" in " ".join(out.split())
    assert "report:" in out


def test_a_truncated_result_in_a_stability_study_is_left_out_in_one_line(two_runs, study_home, capsys):
    _, _, first, second = two_runs
    broken = study_home / "broken" / "20261125T010203Z-s3-eeeeee"
    shutil.copytree(first, broken)
    text = (broken / "result.json").read_text()
    (broken / "result.json").write_text(text[: len(text) // 2])
    start = time.monotonic()
    code, out, err = run_cli(capsys, "study", "stability", str(DEFAULT_ENTRY), "--from-runs", str(first),
                             str(broken), str(second))
    assert "Traceback" not in out + err and "JSONDecodeError" not in out + err
    assert code == 1, (code, out, err)
    flat = " ".join(out.split())
    assert "unreadable run" in flat and "is not JSON" in flat and broken.name in flat
    assert time.monotonic() - start < 30
    (study,) = (study_home / "results" / ENTRY / "studies").glob("stability-*")
    summary = json.loads((study / "summary.json").read_text())
    assert sorted(r["run_id"] for r in summary["runs"]) == sorted([first.name, second.name])
    assert summary["unreadable_runs"][0]["run_id"] == broken.name


def test_a_stability_study_of_only_unreadable_runs_is_one_line(two_runs, study_home, capsys):
    _, _, first, _ = two_runs
    broken = study_home / "broken" / "20261125T010203Z-s3-ffffff"
    shutil.copytree(first, broken)
    (broken / "result.json").write_text("[" * 200_000)
    code, out, err = run_cli(capsys, "study", "stability", str(DEFAULT_ENTRY), "--from-runs", str(broken))
    assert_one_line_error(code, out, err, "none of the 1 runs given can be read", "nested deeper")


def test_a_fifo_for_events_in_a_scaling_run_is_not_studied_and_never_waited_on(two_runs, study_home):
    _, _, first, second = two_runs
    fifo = study_home / "fifo" / "20261126T010203Z-s4-gggggg"
    shutil.copytree(first, fifo)
    edit_result(fifo, run_id=fifo.name, seed=4)
    (fifo / "events.jsonl").unlink()
    os.mkfifo(fifo / "events.jsonl")

    done = threading.Event()

    def release():  # code that waits on the FIFO gets an end of file after 10 s (and fails the timing)
        done.wait(10)
        while not done.is_set():
            try:
                os.close(os.open(fifo / "events.jsonl", os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass  # no reader waiting: nothing to release
            done.wait(0.2)

    threading.Thread(target=release, daemon=True).start()
    start = time.monotonic()
    try:
        out = scaling.study(load_entry(DEFAULT_ENTRY), [fifo, second])
    finally:
        done.set()
    assert time.monotonic() - start < 8
    runs = {r["run_id"]: r for r in out.summary["runs"]}
    assert "FIFO" in runs[fifo.name]["problem"]
    (point,) = [p for s in out.summary["series"] for p in s["points"]]
    assert point["complete_runs"] == 1


def test_a_fifo_among_a_runs_entry_files_is_refused_by_name_not_opened(tmp_path):
    """A study re-reads the entry files a run used (its entry/): a FIFO there once blocked it."""
    from runner.study.common import run_entry_copy
    from runner.safe_read import Unreadable

    entry = tmp_path / "run" / "entry"
    (entry / "sub").mkdir(parents=True)
    (entry / "entry.yaml").write_text("name: x\n")
    (entry / "sub" / "model.py").write_text("X = 1\n")
    with run_entry_copy(tmp_path / "run", "x") as copy:
        assert (copy / "sub" / "model.py").read_text() == "X = 1\n"
    os.mkfifo(entry / "sub" / "pipe.py")
    started = time.monotonic()
    with pytest.raises(Unreadable, match="pipe.py: is a FIFO"):
        with run_entry_copy(tmp_path / "run", "x"):
            pass
    assert time.monotonic() - started < 5
