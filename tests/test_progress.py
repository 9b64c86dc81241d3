"""Progress on every long phase: live on a terminal, plain lines with a heartbeat in a log."""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from runner.report import Reporter


class Stamped(io.StringIO):
    """A log that notes when each line was written (a real clock, as CI's log would)."""

    def __init__(self):
        super().__init__()
        self.lines: list[tuple[float, str]] = []

    def write(self, text: str) -> int:
        for line in text.splitlines():
            if line.strip():
                self.lines.append((time.monotonic(), line))
        return super().write(text)


def plain_reporter() -> tuple[Reporter, Stamped]:
    log = Stamped()
    console = Console(file=log, force_terminal=False, width=200)
    return Reporter(console, progress=console), log


def test_a_phase_in_a_log_prints_each_step_at_once_and_a_heartbeat_between(monkeypatch):
    monkeypatch.setenv("RUNNER_PROGRESS_EVERY_S", "0.3")
    reporter, log = plain_reporter()
    with reporter.phase("build", "step 1/3") as phase:
        time.sleep(1.0)  # a step that says nothing (pip unpacking torch)
        asked = time.monotonic()
        phase.update("step 2/3", step=True)
        said = next(t for t, line in log.lines if "step 2/3" in line)
        phase.update(done=3, total=10)
        time.sleep(0.7)
    texts = [line for _, line in log.lines]
    assert texts[0] == "build: step 1/3, 0 s elapsed"
    assert sum("step 1/3" in line for line in texts) >= 3  # the start, then heartbeats
    assert said - asked < 0.1  # a step's line does not wait for the heartbeat
    assert any(line.startswith("build: step 2/3, 3 of 10 (30%), ") for line in texts)
    stamps = [t for t, _ in log.lines]
    assert max(b - a for a, b in zip(stamps, stamps[1:])) < 0.3 + 0.3  # the interval, with slack
    assert all(line.startswith("build: ") for line in texts)  # one line each, no bar or spinner frames


def test_a_quiet_reporter_prints_nothing_however_long_the_phase(monkeypatch):
    monkeypatch.setenv("RUNNER_PROGRESS_EVERY_S", "0.1")
    log = Stamped()
    quiet = Reporter(Console(file=log), quiet=True)
    with quiet.phase("build", "step 1/3") as phase:
        phase.update("step 2/3", step=True)
        time.sleep(0.3)
    assert log.lines == [] and phase.text == "step 2/3"


def test_a_phase_on_a_terminal_is_one_live_line_that_goes_when_it_ends():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=80, color_system=None)
    with Reporter(console, progress=console).phase("inspect", "reading image 0123") as phase:
        phase.read(2_500_000)
        phase.read(500_000)
        console.print(phase)  # what the live line draws
    drawn = out.getvalue()
    assert "inspect: reading image 0123, 3.0 MB, 2 files, 0 s elapsed" in drawn
    assert "\n" not in phase.__rich__().plain


def test_the_build_line_shows_the_step_and_pip_and_marks_the_entry_text():
    from runner.entry_build.entry_image import BuildProgress

    reporter, log = plain_reporter()
    with reporter.phase("build", "probe, sending the build context") as phase:
        progress = BuildProgress(phase, {"torch": 190_000_000, "sympy": 6_000_000, "numpy": 16_000_000})
        progress.feed("Step 1/9 : FROM $BASE_IMAGE\nStep 4/9 : RUN python3 -m venv /opt/venv && pip ins")
        progress.feed("tall -r lock\n Processing /wheels/torch-2.13.0+cpu-cp311-cp311-manylinux.whl\n")
        progress.feed("Installing collected packages: mpmath, numpy, torch, sympy\n")
        # An entry's RUN step printing what looks like the runner's own line, with a terminal escape:
        progress.feed("Step 5/9 : RUN echo 'x\x1b]0;owned\x07'\nbuild: step 9/9, done\n")
        progress.feed("Step 6 : COPY entry/ /entry/\n")  # ch-image's instruction line, as its engine gives it
    texts = [line for _, line in log.lines]
    assert texts[1] == 'build: step 1/9, entry: "FROM $BASE_IMAGE", 0 s elapsed'
    assert texts[2].startswith('build: step 4/9, entry: "RUN python3 -m venv /opt/venv && pip install ..."')
    assert texts[3].startswith('build: step 4/9, pip installing 4 packages (entry: "torch, numpy, sympy" ...)')
    assert texts[4] == "build: step 5/9, entry: \"RUN echo 'x\\x1b]0;owned\\x07'\", 0 s elapsed"
    assert texts[5].startswith('build: step 6, entry: "COPY entry/ /entry/"')
    assert "build: step 9/9, done" not in texts  # the entry's output is not a line of ours
    assert not any("\x1b" in line for line in texts)


def test_the_base_image_build_says_which_debootstrap_stage_it_is_in(tmp_path, monkeypatch):
    from runner.images import debootstrap

    monkeypatch.setenv("RUNNER_PROGRESS_EVERY_S", "0.4")
    reporter, log = plain_reporter()
    script = "echo 'I: Retrieving InRelease'; sleep 1.2; echo 'I: Extracting base-files...'; sleep 1.2"
    from runner.report import reporting

    with reporting(reporter):
        debootstrap._run(["sh", "-c", script], {"PATH": "/usr/bin:/bin"}, tmp_path / "log", what="debootstrap of bookworm")
    texts = [line for _, line in log.lines]
    assert any(line.startswith("base: debootstrap of bookworm: retrieving, ") for line in texts), texts
    assert any(line.startswith("base: debootstrap of bookworm: extracting, ") for line in texts), texts
    stamps = [t for t, _ in log.lines]
    assert max(b - a for a, b in zip(stamps, stamps[1:])) < 0.4 + 0.6


def test_the_heartbeat_interval_comes_from_the_environment(monkeypatch):
    from runner.report import PROGRESS_EVERY_S, progress_every_s

    assert PROGRESS_EVERY_S == 30
    for value, expected in (("2.5", 2.5), ("nonsense", PROGRESS_EVERY_S), ("0", PROGRESS_EVERY_S)):
        monkeypatch.setenv("RUNNER_PROGRESS_EVERY_S", value)
        assert progress_every_s() == expected
    monkeypatch.delenv("RUNNER_PROGRESS_EVERY_S")
    code = "from runner.report import progress_every_s; print(progress_every_s())"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "30.0"


# -- a real run in a log ------------------------------------------------------------------------
HEARTBEAT_S = 3.0
SLACK_S = 4.0  # a contended 2-core host: the heartbeat thread waits for the GIL and the pipe


@pytest.mark.docker
def test_a_run_in_a_log_shows_every_phase_and_never_goes_quiet(engine, tmp_path):
    """``runner reproduce ... | cat``: stdout and stderr a pipe, the heartbeat short. Every long
    phase says what it does (build step n/m, inspection, training epoch, inference backend),
    and no two lines of a phase are further apart than the heartbeat (and some slack)."""
    entry = tmp_path / "cheat-clock"
    shutil.copytree(Path(__file__).parent / "entries" / "cheat-clock", entry)
    code = (entry / "cheat.py").read_text()
    (entry / "cheat.py").write_text(code.replace('log("seed_seen"', 'log("epoch_start", epoch_num=1)\nlog("seed_seen"'))
    (entry / "note.txt").write_text(f"{time.time_ns()}\n")  # a new image: the build's steps run
    env = {**os.environ, "RUNNER_RESULTS": str(tmp_path / "results"), "RUNNER_PROGRESS_EVERY_S": str(HEARTBEAT_S),
           "RUNNER_MAX_OTHER_RUNNABLE": "1000", "RUNNER_MAX_STEAL": "1"}
    proc = subprocess.Popen([sys.executable, "-u", "-m", "runner", "reproduce", str(entry), "--smoke", "--no-loadgen"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[tuple[float, str]] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append((time.monotonic(), line.rstrip("\n")))
    assert proc.wait(timeout=60) == 0, "\n".join(text for _, text in lines)
    texts = [text for _, text in lines]
    shown = "\n".join(texts)
    assert re.search(r"^build: step \d+/\d+, entry: \"COPY entry/ /entry/\"", shown, re.M), shown
    assert re.search(r"^inspect: reading image [0-9a-f]{12}( layer by layer(, in the engine's store)?)?, [\d.,]+ [kMG]?B(, [\d,]+ files)?, ",
                     shown, re.M), shown
    assert re.search(r"^train epoch 1 · [\d:]+( s)? · ", shown, re.M), shown
    assert re.search(r"^train ran \d+ s · scored 1/1", shown, re.M), shown
    assert re.search(r"^infer: backend 1 of 1 \(torch\), timing [\d,]+ items, ", shown, re.M), shown
    assert not any("\x1b[" in text or "\r" in text for text in texts)  # no live display in a log
    for name in ("build", "inspect", "train", "infer"):
        assert any(re.match(rf"{name}[: ]", text) for text in texts), name
    # The log never goes quiet: whatever phase is open (the innermost speaks), a line at least
    # every heartbeat, from the first line to the last.
    gaps = [(b[0] - a[0], b[1]) for a, b in zip(lines, lines[1:])]
    assert max(gap for gap, _ in gaps) < HEARTBEAT_S + SLACK_S, max(gaps)


def test_inference_items_are_shown_a_tenth_at_a_time_between_items_and_only_for_the_plans_backends(capsys):
    """The harness prints how far a timed pass is between two items (never inside one's timing);
    the host shows it for the plan's own backends only (the entry's builder runs beside the
    harness and could print such a line)."""
    import numpy as np

    from runner.harness.timing import PROGRESS_PREFIX, timed_pass
    from runner.inference.phase import InferenceProgress, Windows

    images = np.zeros((50, 1, 4, 4), dtype=np.float32)
    done = timed_pass(lambda x: 0, images, warmup=0, topk=1, backend="torch")
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith(PROGRESS_PREFIX)]
    assert printed == [f"{PROGRESS_PREFIX} torch {k}/50 items" for k in range(5, 51, 5)]
    assert len(done.latencies_ns) == 50 and (done.latencies_ns > 0).all()
    reporter, log = plain_reporter()
    with reporter.phase("infer", "starting the harness") as phase:
        progress = InferenceProgress(Windows(), ("torch",), phase)
        progress.on_line(printed[2], 1.0)
        progress.on_line(f"{PROGRESS_PREFIX} forged 9/10 items", 1.1)  # not a backend of the plan
        phase.beat()  # what the heartbeat prints next
    assert phase.text == "backend 1 of 1 (torch), 15 of 50 items timed"
    assert not any("forged" in line for _, line in log.lines)


def test_question_answering_is_shown_a_tenth_at_a_time_too(capsys):
    """SQuAD's timed pass (one question at a time) prints the same lines as the images'."""
    from types import SimpleNamespace

    import numpy as np

    from runner.harness.questions import timed_pass
    from runner.harness.timing import PROGRESS_PREFIX

    def span_scores(contexts, questions):  # one token, the whole context
        return np.array([[[0, len(contexts[0])]]]), np.zeros((1, 1)), np.zeros((1, 1))

    loaded = SimpleNamespace(native=None, span_scores=span_scores)
    examples = [{"id": str(k), "context": f"context {k}", "question": "which?"} for k in range(23)]
    answers, latencies, _, _ = timed_pass(loaded, examples, warmup=0, backend="torch")
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith(PROGRESS_PREFIX)]
    assert printed == [f"{PROGRESS_PREFIX} torch {k}/23 items" for k in range(2, 24, 2)]
    assert answers["7"] == "context 7" and len(latencies) == 23


def test_a_json_command_reports_its_progress_on_stderr(capsys):
    """`--json`: stdout holds the JSON alone, whatever the command's stages say on the way."""
    import argparse
    import json

    from runner.cli import _run_command
    from runner.report import reporter

    def command(args) -> int:
        with reporter().phase("stage", "parsing mnist_train.csv") as phase:
            phase.update("parsing mnist_test.csv", step=True)
        print(json.dumps({"ok": True}))
        return 0

    assert _run_command(command, argparse.Namespace(json=True)) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == {"ok": True}
    assert "stage: parsing mnist_test.csv" in err
    _run_command(command, argparse.Namespace(json=False))
    out, err = capsys.readouterr()
    assert "stage: parsing mnist_test.csv" in out and not err
