"""Hostile entry folders: links, devices and FIFOs that would carry host files (the
evaluation labels, the signing key) into the image are refused with the file named,
before anything is copied or built, and their targets are never printed."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hostile_helpers import assert_one_line_error, no_results, probe_entry, results, run_cli  # noqa: F401

from runner.entry_build import context as build_context
from runner.errors import UserError

SECRET = "-----BEGIN PRIVATE KEY----- not-a-real-key"


@pytest.fixture
def host_files(tmp_path) -> dict[str, Path]:
    """Stand-ins for what an entry must never reach: eval labels and a private key."""
    host = tmp_path / "host"
    host.mkdir()
    (host / "labels.npy").write_bytes(b"\x93NUMPY fake labels")
    (host / "signing.key").write_text(SECRET)
    (host / "data").mkdir()
    return {p.name: p for p in host.iterdir()}


def build(capsys, entry: Path):
    return run_cli(capsys, "build", str(entry))


def test_symlink_to_host_labels_is_refused(tmp_path, capsys, host_files):
    entry = probe_entry(tmp_path, "sandbox")
    os.symlink(host_files["labels.npy"], entry / "labels.npy")
    assert_one_line_error(*build(capsys, entry), "labels.npy", "symbolic link")


def test_symlink_to_the_signing_key_is_refused_and_never_printed(tmp_path, capsys, host_files):
    entry = probe_entry(tmp_path, "sandbox")
    os.symlink(host_files["signing.key"], entry / "key.pem")
    code, out, err = build(capsys, entry)
    assert_one_line_error(code, out, err, "key.pem", "symbolic link")
    assert SECRET not in out + err


def test_symlinked_folder_is_refused(tmp_path, capsys, host_files):
    entry = probe_entry(tmp_path, "sandbox")
    os.symlink(host_files["data"], entry / "data")
    assert_one_line_error(*build(capsys, entry), "data", "symbolic link")


def test_dangling_symlink_is_refused(tmp_path, capsys):
    entry = probe_entry(tmp_path, "sandbox")
    os.symlink("/nonexistent/target", entry / "ghost.py")
    assert_one_line_error(*build(capsys, entry), "ghost.py", "symbolic link")


def test_symlink_deep_in_a_subfolder_is_refused(tmp_path, capsys, host_files):
    entry = probe_entry(tmp_path, "sandbox")
    (entry / "pkg" / "sub").mkdir(parents=True)
    os.symlink(host_files["labels.npy"], entry / "pkg" / "sub" / "weights.bin")
    assert_one_line_error(*build(capsys, entry), "pkg/sub/weights.bin")


def test_fifo_is_refused_without_hanging(tmp_path, capsys):
    entry = probe_entry(tmp_path, "sandbox")
    os.mkfifo(entry / "pipe")
    started = time.monotonic()
    assert_one_line_error(*build(capsys, entry), "pipe", "FIFO")
    assert time.monotonic() - started < 30  # reading a FIFO would block forever


def test_device_node_is_refused(tmp_path, capsys):
    entry = probe_entry(tmp_path, "sandbox")
    os.mknod(entry / "null", 0o600 | 0o020000, os.makedev(1, 3))  # a character device, /dev/null's
    assert_one_line_error(*build(capsys, entry), "null", "device")


def test_hard_link_to_a_host_file_is_refused(tmp_path, capsys, host_files):
    entry = probe_entry(tmp_path, "sandbox")
    os.link(host_files["signing.key"], entry / "innocent.txt")
    code, out, err = build(capsys, entry)
    assert_one_line_error(code, out, err, "innocent.txt", "hard-linked")
    assert SECRET not in out + err


def test_dockerfile_that_is_a_symlink_is_refused(tmp_path, capsys):
    entry = probe_entry(tmp_path, "sandbox")
    (entry / "Dockerfile").rename(tmp_path / "Dockerfile.real")
    os.symlink(tmp_path / "Dockerfile.real", entry / "Dockerfile")
    assert_one_line_error(*build(capsys, entry), "Dockerfile", "symbolic link")


def test_reproduce_refuses_a_linked_entry_before_any_result(tmp_path, capsys, results, host_files):
    entry = probe_entry(tmp_path, "sandbox")
    os.symlink(host_files["labels.npy"], entry / "labels.npy")
    assert_one_line_error(*run_cli(capsys, "reproduce", str(entry), "--smoke", "--no-infer"), "labels.npy")
    assert no_results(results)


def test_build_context_never_follows_a_link(tmp_path, host_files):
    entry = probe_entry(tmp_path, "sandbox")
    os.symlink(host_files["signing.key"], entry / "key.pem")
    with pytest.raises(UserError, match="key.pem"):
        build_context.content_key(entry, "base", entry / "requirements.lock")
    with pytest.raises(UserError, match="key.pem"):
        build_context.make_context(entry, {}, entry / "requirements.lock")
