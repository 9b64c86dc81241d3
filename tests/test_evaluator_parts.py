"""The evaluator's parts without a container (runner/run/evaluator.py): what its output says
(``_Progress``, fed the harness's own lines), when it is frozen (``_Freezer``), the request
files it is given and the answer files it is held to. The evaluator's container itself is
exercised by the runs in test_reproduce.py and test_threat_model.py."""

from __future__ import annotations

import json
import time
from pathlib import Path

from runner.engine.interface import EngineError
from runner.harness import mllog
from runner.run.evaluator import (
    _answer_files, _Freezer, _Progress, _request_body, _write_request, evaluator_spec,
)


def _said(capsys, key: str, **metadata) -> str:
    """The line the harness prints for ``key`` (its own ``mllog.emit``)."""
    mllog.emit(key, **metadata)
    return capsys.readouterr().out.rstrip("\n")


def test_progress_keeps_the_first_ready_and_the_first_model_built_of_a_request(capsys):
    progress = _Progress()
    progress.see(_said(capsys, "evaluator_ready"), 0.0)
    first_ready = progress.ready_at
    assert progress.ready and first_ready is not None
    progress.restart()  # a new container after a failure: not ready, its first ready time kept
    assert not progress.ready and progress.errors == []
    progress.see(_said(capsys, "evaluator_ready"), 0.0)
    assert progress.ready_at == first_ready

    progress.see(_said(capsys, "model_built", index=3, shuffled_tensors=4, seconds=0.5), 1.0)
    stamped = progress.built[3][0]
    progress.see(_said(capsys, "model_built", index=3, shuffled_tensors=9), 2.0)
    assert progress.built[3][0] == stamped and progress.built[3][1]["shuffled_tensors"] == 4
    progress.see(_said(capsys, "model_built", index="3"), 2.0)  # not an index: ignored
    assert list(progress.built) == [3]


def test_progress_records_answers_failures_and_the_harness_errors(capsys):
    progress = _Progress()
    progress.see(_said(capsys, "evaluation_done", index=1), 1.0)
    progress.see(_said(capsys, "evaluation_failed", index=2, message="no such checkpoint"), 1.0)
    progress.see(_said(capsys, "evaluation_failed", index=3), 1.0)
    progress.see("harness: error: the builder raised ImportError", 1.0)
    progress.see("some output of the entry's builder", 1.0)
    assert progress.answers == {1: None, 2: "no such checkpoint", 3: "failed"}
    assert progress.errors == ["the builder raised ImportError"]
    assert set(progress.done_at) == {1, 2, 3}


def test_an_answer_carries_the_builders_time_and_the_prediction_time_on_the_hosts_clock(capsys):
    progress = _Progress()
    asked = time.monotonic()
    progress.see(_said(capsys, "model_built", index=0, shuffled_tensors=5, loader="x"), 9.0)
    progress.see(_said(capsys, "evaluation_done", index=0), 9.5)
    answer = progress.answer(0, asked, {"clean": "0/clean.npy"}, "0/provenance.json")
    built, done = progress.built[0][0], progress.done_at[0]
    assert answer.builder_seconds == round(built - asked, 6) >= 0  # the host's times, not the line's t
    assert answer.predict_seconds == round(done - built, 6) >= 0
    assert answer.notes == {"shuffled_tensors": 5}  # only the runner's own notes
    assert answer.predict_cpu_seconds is None  # no container: no CPU counter
    assert answer.files == {"clean": "0/clean.npy"} and answer.provenance == "0/provenance.json"
    # A request that failed before its model was built has no builder time.
    progress.see(_said(capsys, "evaluation_failed", index=1), 1.0)
    assert progress.answer(1, asked, {}, None).builder_seconds is None


def test_a_request_with_no_word_while_the_evaluator_runs_is_late_and_not_once_it_stopped(capsys):
    progress = _Progress()
    assert progress.wait_built(0, 0.01, lambda: True) == (None, True)
    assert progress.wait_built(0, 0.01, lambda: False) == (None, False)
    progress.see(_said(capsys, "evaluation_failed", index=0, message="bad"), 1.0)
    assert progress.wait_built(0, 5.0, lambda: True) == (None, False)  # failed: not late
    assert progress.wait_answer(0, 5.0, lambda: True) == (True, "bad")
    assert progress.wait_answer(1, 0.01, lambda: True) == (False, None)


class _Recorded:
    """Records the freezes and thaws it is asked for; ``fail`` makes them raise."""

    def __init__(self, fail: bool = False):
        self.calls: list[str] = []
        self.fail = fail

    def freeze(self) -> None:
        self.calls.append("freeze")
        if self.fail:
            raise EngineError("container exited")

    def thaw(self) -> None:
        self.calls.append("thaw")


def test_the_freezer_freezes_once_and_never_during_a_request_a_close_or_after_the_entry():
    freezer = _Freezer()
    freezer.pause(running=True)  # no container yet: nothing to freeze
    container = freezer.container = _Recorded()
    freezer.pause(running=False)
    assert container.calls == []
    freezer.pause(running=True)
    freezer.pause(running=True)
    assert container.calls == ["freeze"] and freezer.paused
    freezer.resume()
    freezer.resume()
    assert container.calls == ["freeze", "thaw"] and not freezer.paused
    for flag in ("asking", "closing", "awake"):
        freezer.flag(**{flag: True})
        freezer.pause(running=True)
        assert container.calls == ["freeze", "thaw"], flag
        freezer.flag(**{flag: False})
    freezer.pause(running=True)
    assert container.calls[-1] == "freeze"


def test_a_container_that_cannot_be_frozen_is_left_running():
    freezer = _Freezer()
    freezer.container = _Recorded(fail=True)
    freezer.pause(running=True)
    assert not freezer.paused
    freezer.resume()
    assert freezer.container.calls == ["freeze"]  # nothing to thaw


def test_a_request_appears_whole_and_says_only_what_is_asked(tmp_path):
    assert _request_body("c0.pt", None, 100, None, False) == {"checkpoint": "/checkpoints/c0.pt"}
    assert _request_body("c0.pt", 7, 100, (50, 3), True) == {
        "checkpoint": "/checkpoints/c0.pt", "shuffle_seed": 7, "items": 100, "weights": True,
        "probe_items": 50, "probe_seed": 3}
    asked = _write_request(tmp_path, 4, {"checkpoint": "/checkpoints/c0.pt"})
    assert asked <= time.monotonic()
    assert [p.name for p in tmp_path.iterdir()] == ["4.json"]
    assert json.loads((tmp_path / "4.json").read_text()) == {"checkpoint": "/checkpoints/c0.pt"}


def _plan(tmp_path: Path, probe: bool):
    from dataclasses import replace

    from runner.options import ReproduceOptions
    from runner.plan import RunData, make_plan

    plan = make_plan(Path(__file__).resolve().parents[1] / "entries" / "mnist-cnn-cpu", ReproduceOptions(seed=1))
    run = plan.resolved(gpus=0, backends=["torch"], image="img",
                        data=RunData(tmp_path, tmp_path, "sha256:0")).for_run(1, tmp_path, tmp_path)
    return replace(run, probe_dir=tmp_path / "probe" if probe else None)


def test_an_answer_holds_every_input_set_and_a_sensitivity_check_the_clean_set_only(tmp_path):
    extra = {"v2": tmp_path / "v2", "c10": tmp_path / "c10"}
    plan = _plan(tmp_path, probe=True)
    assert _answer_files(plan, extra, 2, None) == (
        {"clean": "2/clean.npy", "probe": "2/probe.npy", "c10": "2/c10.npy", "v2": "2/v2.npy"}, "2/provenance.json")
    assert _answer_files(plan, extra, 2, 11) == ({"clean": "2/clean.npy"}, None)
    assert _answer_files(_plan(tmp_path, probe=False), {}, 0, None) == ({"clean": "0/clean.npy"}, "0/provenance.json")
    spec = evaluator_spec(plan, extra)
    inputs = spec.command[spec.command.index("--inputs") + 1:spec.command.index("--kind")]
    assert inputs == ["clean=/data/eval", "probe=/data/probe", "c10=/data/extra/c10", "v2=/data/extra/v2"]
    assert {m.container for m in spec.mounts} >= {"/data/probe", "/data/extra/c10", "/data/extra/v2"}

