"""Entry folders and digests are untrusted input too (issue 46, "streams, not slurps").

The information budget (``runner.entry_build.information``) read each entry file whole and
compressed it whole three times: a 4 GiB sparse file took 41 s and 4.1 GB of memory, one
16 MB text 183 s, 20,000 small files 107 s; ``python3 -m runner.entry_build.information``
on a FIFO or an unreadable file ended in a traceback; a file name that is not UTF-8 ended
``runner build`` in ``UnicodeEncodeError``; ``sha256_file`` on a FIFO never returned. Each
case here runs the real code, the slow ones in a subprocess with a time-out (so the tree
before the change fails them in seconds, not minutes).
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from hostile_helpers import DEFAULT_ENTRY, assert_one_line_error, run_cli

from runner.entry_build import information
from runner.entry_build.information import DEFAULT_BUDGET_BYTES, compressed_size
from runner.tasks import TASKS

STOP_BYTES = getattr(information, "STOP_BYTES", DEFAULT_BUDGET_BYTES)  # (absent before the change)

REPO = Path(__file__).resolve().parent.parent.parent
WORDS = "the of and to in is it that was for on are with as his they".split()


def _entry(tmp_path: Path) -> Path:
    folder = tmp_path / DEFAULT_ENTRY.name  # the manifest's name is the folder's
    shutil.copytree(DEFAULT_ENTRY, folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def _python(code: str, *args: str, timeout: float = 20) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter of this tree (its own peak memory, its own time-out:
    the tree before the change fails in seconds, not after minutes)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=REPO)


# The information check of a folder (``python3 -m runner.entry_build.information``), in a
# subprocess: its exit status, its lines, and its own peak memory (MiB) on the last line of
# stdout. As root, it drops to ``nobody`` once imported (argv[2]), to meet a file it cannot read.
CHECK = """
    import os, sys
    def peak_mib():  # this process's own peak (VmHWM starts again at exec; ru_maxrss keeps the parent's)
        with open("/proc/self/status") as fh:
            return next(int(line.split()[1]) // 1024 for line in fh if line.startswith("VmHWM:"))
    from runner.entry_build.information import _main
    if len(sys.argv) > 2:
        os.setgid(int(sys.argv[2]))
        os.setuid(int(sys.argv[2]))
    status = _main(sys.argv[1:2])
    print(f"peak {peak_mib()}")
    sys.exit(status)
"""

# measure_entry of a folder in a subprocess: what each file counted, and the seconds.
MEASURE = """
    import sys, time
    from pathlib import Path
    from runner.entry_build.context import entry_files
    from runner.entry_build.information import measure_entry
    folder = Path(sys.argv[1])
    started = time.monotonic()
    report = measure_entry(folder, entry_files(folder), folder / "requirements.lock")
    seconds = time.monotonic() - started
    unmeasured = sum(1 for f in report.files if f.counted.startswith("not measured"))
    print(len(report.files), unmeasured, report.total, report.over, report.largest_literal.path)
    for f in report.files:
        if f.counted not in ("whole", "without the pins' hashes") and not f.counted.startswith("not measured"):
            print("counted", f.path, f.compressed, f.counted)
    print(f"seconds {seconds:.2f}")
"""


def _check(folder: Path, timeout: float = 20, user: int | None = None) -> tuple[int, str, str, int]:
    done = _python(CHECK, str(folder), *([str(user)] if user is not None else []), timeout=timeout)
    *lines, peak = done.stdout.strip().split("\n") or ["peak 0"]
    return done.returncode, "\n".join(lines), done.stderr, int(peak.split()[1]) if peak.startswith("peak") else 0


def _measure(folder: Path, timeout: float) -> list[str]:
    done = _python(MEASURE, str(folder), timeout=timeout)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done
    return done.stdout.strip().split("\n")


def test_a_4_gib_sparse_entry_file_is_refused_by_its_size_with_little_memory(tmp_path):
    folder = _entry(tmp_path)
    with open(folder / "weights.bin", "wb") as fh:
        fh.truncate(4 << 30)  # 4 GiB apparent, nothing on disk
    code, out, err, peak = _check(folder)
    assert code == 2 and out == "", (code, out, err)
    assert "Traceback" not in err and len(err.strip().split("\n")) == 1, err
    assert "weights.bin" in err and "4,096.0 MiB (its apparent size)" in err, err
    assert peak < 100, f"peak {peak} MiB"


def test_a_16_mb_text_stops_at_the_budget_without_compressing_it_whole(tmp_path):
    folder = _entry(tmp_path)
    hexed = os.urandom(8_000_000).hex()  # 16 MB of text that no compressor shrinks below 8 MB
    (folder / "notes.txt").write_text("\n".join(hexed[i:i + 100] for i in range(0, len(hexed), 100)))
    summary, counted, seconds = _measure(folder, timeout=30)
    files, unmeasured, total, over, literal = summary.split()
    assert over == "True" and literal == "notes.txt", summary
    _, path, compressed, how = counted.split(" ", 3)
    assert path == "notes.txt" and int(compressed) > STOP_BYTES and "lower bound" in how, counted
    assert float(seconds.split()[1]) < 10, seconds


def test_20000_small_files_stop_once_over_every_budget(tmp_path):
    folder = _entry(tmp_path)
    many = folder / "many"
    many.mkdir()
    rnd = random.Random(46)
    for i in range(20_000):
        (many / f"m{i:05}.py").write_text(f'"""Note {i}."""\nX = "{rnd.randbytes(16).hex()}"  # {rnd.choice(WORDS)}\n')
    summary, seconds = _measure(folder, timeout=30)
    files, unmeasured, total, over, literal = summary.split()
    assert int(files) == 20_006 and int(unmeasured) > 15_000 and over == "True", summary
    assert STOP_BYTES < int(total) < STOP_BYTES + 4096, summary
    assert float(seconds.split()[1]) < 10, seconds


def test_the_stop_is_over_every_budget_a_task_sets():
    """A figure stopped at STOP_BYTES is a lower bound: it says "over" only above every budget."""
    assert DEFAULT_BUDGET_BYTES < information.STOP_BYTES
    for task in TASKS.values():
        assert (task.information_budget or DEFAULT_BUDGET_BYTES) < STOP_BYTES
        assert all(rules.information_budget < STOP_BYTES for rules in task.rules_history), task.id


def test_a_streamed_file_read_to_its_end_has_the_figure_of_one_read_whole():
    rnd = random.Random(7)
    data = "".join(f"{rnd.choice(WORDS)} " for _ in range(60_000)).encode()
    chunks = [data[i:i + (64 << 10)] for i in range(0, len(data), 64 << 10)]
    assert information.streamed_size(chunks, len(data), stop_at=1 << 30) == (compressed_size(data), False)
    noise = [os.urandom(64 << 10) for _ in range(32)]  # 2 MiB that no compressor shrinks
    size, stopped = information.streamed_size(noise, 2 << 20, stop_at=4096)
    assert stopped and 4096 < size < 1 << 20


@pytest.mark.parametrize("where", ["in the folder", "as the manifest", "as the folder"])
def test_the_information_check_on_a_fifo_is_one_line(tmp_path, where):
    folder = _entry(tmp_path)
    if where == "in the folder":
        os.mkfifo(folder / "pipe.py")
    elif where == "as the manifest":
        (folder / "entry.yaml").unlink()
        os.mkfifo(folder / "entry.yaml")
    else:
        shutil.rmtree(folder)
        os.mkfifo(folder)
    code, out, err, _ = _check(folder, timeout=10)
    assert code == 2 and out == "", (code, out, err)
    assert "Traceback" not in err and len(err.strip().split("\n")) == 1, err
    assert "FIFO" in err, err


def test_the_information_check_on_an_unreadable_file_is_one_line():
    root = Path(tempfile.mkdtemp(prefix="unreadable-"))  # not under pytest's own 0700 folder
    try:
        root.chmod(0o755)
        folder = _entry(root)
        secret = folder / "secret.py"
        secret.write_text("X = 1\n")
        secret.chmod(0)
        user = 65534 if os.geteuid() == 0 else None  # root reads anything: check as nobody
        code, out, err, _ = _check(folder, timeout=10, user=user)
    finally:
        shutil.rmtree(root)
    assert code == 2 and out == "", (code, out, err)
    assert "Traceback" not in err and len(err.strip().split("\n")) == 1, err
    assert "secret.py" in err and "permission denied" in err, err


def test_an_entry_file_name_that_is_not_utf8_is_refused_before_any_engine(tmp_path, capsys, monkeypatch):
    folder = _entry(tmp_path)
    with open(os.path.join(os.fsencode(folder), b"caf\xe9.py"), "w") as fh:
        fh.write("X = 1\n")
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")  # no engine is reached
    code, out, err = run_cli(capsys, "build", str(folder))
    assert_one_line_error(code, out, err, "an entry file's name is not UTF-8", "caf\\xe9.py", "rename it")
    code, out, err, _ = _check(folder, timeout=10)
    assert code == 2 and "caf\\xe9.py" in err and "Traceback" not in err, (code, out, err)


def test_a_fifo_is_digested_as_one_line_not_a_hang(tmp_path):
    os.mkfifo(tmp_path / "result.json")
    done = _python("""
        import sys
        from runner.digests import sha256_file
        try:
            sha256_file(sys.argv[1])
        except OSError as e:
            print(type(e).__name__, e)
    """, str(tmp_path / "result.json"), timeout=10)
    assert "UnreadableFile" in done.stdout and "is a FIFO, not a regular file" in done.stdout, done


def test_the_readers_benchmark_prints_each_figure_beside_its_target(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    code, out, err = run_cli(capsys, "bench", "readers", "--sparse-gib", "1", "--text-mb", "2", "--small-files", "300")
    assert code == 0 and "Traceback" not in err, (code, out, err)
    for case, target in (("default entry", "< 1 s"), ("1 GiB sparse file", "< 1 s, < 100 MiB"),
                         ("2 MB text", "< 5 s"), ("300 small files", "< 5 s")):
        assert re.search(rf"{re.escape(case)}\s*│\s*\d+\.\d\d\s*│\s*\d+\s*│\s*{re.escape(target)}", out), case
    assert "refused: weights.bin" in out and "(over the budget)" in out
