"""Hostile command lines and host faults: argument nonsense is refused by argparse before
any build; a read-only results folder, a full disk and an unreachable DOCKER_HOST are one
line each, with nothing left half-written."""

from __future__ import annotations

import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
from hostile_helpers import assert_one_line_error, no_results, probe_entry, results, run_cli  # noqa: F401

from runner.engine import daemon


@pytest.mark.parametrize("args, needle", [
    (["--runs", "0"], "--runs"),
    (["--runs", "-3"], "--runs"),
    (["--runs", "1000000"], "--runs"),
    (["--runs", "two"], "not a whole number"),
    (["--seed", "-1"], "--seed"),
    (["--seed", "99999999999"], "--seed"),
    (["--timeout-minutes", "0"], "--timeout-minutes"),
    (["--timeout-minutes", "-5"], "--timeout-minutes"),
    (["--timeout-minutes", "nan"], "--timeout-minutes"),
    (["--timeout-minutes", "inf"], "--timeout-minutes"),
])
def test_nonsense_arguments_are_refused_before_any_work(tmp_path, capsys, results, args, needle):
    entry = probe_entry(tmp_path, "sandbox")
    code, out, err = run_cli(capsys, "reproduce", str(entry), "--smoke", "--no-infer", *args)
    assert_one_line_error(code, out, err, needle)
    assert "usage:" not in err and no_results(results)


def test_an_unknown_command_is_one_line(capsys):
    assert_one_line_error(*run_cli(capsys, "reproduc"), "invalid choice")


def test_the_real_console_script_prints_one_line_for_bad_runs(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "runner", "reproduce", str(tmp_path), "--runs", "-3"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


@contextmanager
def tmpfs(path: Path, options: str):
    """A small tmpfs at ``path`` (the tests run as root, as CI does)."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(folder: Path) -> None:
    """Write until the file system is full."""
    try:
        with open(folder / "filler", "wb", buffering=0) as fh:
            while True:
                fh.write(b"\0" * 4096)
    except OSError:
        pass


def test_keys_on_a_full_disk_leave_no_temporary_key(tmp_path, capsys, monkeypatch):
    with tmpfs(tmp_path / "home", "size=256k") as home:
        monkeypatch.setenv("RUNNER_HOME", str(home))
        (home / "keys").mkdir()
        fill(home)
        line = assert_one_line_error(*run_cli(capsys, "keys", "generate"), "signing key")
        assert "No space left" in line
        assert sorted(p.name for p in (home / "keys").iterdir()) == []  # no signing.key.tmp


def test_a_full_runner_home_is_one_line_for_any_write(tmp_path, capsys, monkeypatch):
    with tmpfs(tmp_path / "home", "size=64k") as home:
        monkeypatch.setenv("RUNNER_HOME", str(home))
        fill(home)
        code, out, err = run_cli(capsys, "keys", "generate", "--out", str(home / "k"))
        assert_one_line_error(code, out, err, "No space left")


def test_unreachable_docker_host_never_starts_a_second_engine(capsys, monkeypatch):
    started = []
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")  # the discard port: nothing answers
    monkeypatch.setattr(daemon, "start_dockerd", lambda *a, **k: started.append(1))
    monkeypatch.setattr(daemon, "apt_install", lambda *a, **k: started.append(2))
    line = assert_one_line_error(*run_cli(capsys, "setup"), "DOCKER_HOST=tcp://127.0.0.1:9",
                                 "unreachable engine")
    assert "unset it" in line and started == []
