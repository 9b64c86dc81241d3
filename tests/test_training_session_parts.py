"""The training session's collaborators (runner/run: ``event_log``, ``freezer``,
``evaluation_queue``, ``evidence``), each on its own: the clock's launch stamp and the
event stream's order; the cap on evaluation requests, the checkpoint copies and what happens
to the windows after the crossing; and, against a real container of the session's engine,
freezing and thawing it, the CPU time that stands still while it is frozen, and a rank that
does not confirm its pause."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest

from runner.run.evaluation_queue import MAX_EVALUATIONS, EvaluationQueue, Pending
from runner.run.event_log import LAUNCH_MARKER, EventLog
from runner.run.freezer import Freezer
from runner.score.tta import EVAL_FREEZE, EVAL_THAW, LAUNCH, LAUNCH_GAP_LIMIT_S

ROOT = Path(__file__).resolve().parents[1]


def mllog(key: str, value=None, **metadata) -> str:
    return ":::MLLOG " + json.dumps({"key": key, "value": value, "metadata": metadata})


# -- the event log ----------------------------------------------------------------------------
def test_the_launchers_marker_in_time_starts_the_clock_and_is_no_event_itself():
    log = EventLog()
    assert log.entry_line(LAUNCH_MARKER, 0.4) is None
    event = log.entry_line(mllog("epoch_start", epoch_num=1), 1.0)
    assert event is not None and event.key == "epoch_start" and event.seq == 1
    assert [(e.key, e.t, e.metadata.get("stamp"), e.origin) for e in log.events] == [
        (LAUNCH, 0.4, "launcher", "runner"), ("epoch_start", 1.0, None, "entry")]


def test_a_late_marker_or_another_first_line_falls_back_to_the_containers_start():
    late = EventLog()
    assert late.entry_line(LAUNCH_MARKER, LAUNCH_GAP_LIMIT_S + 1) is None
    assert late.events[0].t == 0.0 and late.events[0].metadata["stamp"] == "container-start"
    assert late.events[0].metadata["marker_at"] == LAUNCH_GAP_LIMIT_S + 1
    early = EventLog()
    event = early.entry_line(mllog("epoch_start", epoch_num=0), 0.2)  # before the launcher spoke
    assert early.events[0].metadata == {"stamp": "container-start", "marker_at": None,
                                        "first_line": mllog("epoch_start", epoch_num=0)[:200]}
    assert event is early.events[1]  # the line itself still counts
    early.ensure_launch()
    assert len(early.events) == 2  # output was seen: no second launch


def test_a_silent_container_gets_its_launch_at_the_start():
    log = EventLog()
    log.ensure_launch()
    assert [(e.key, e.t, e.metadata["first_line"]) for e in log.events] == [(LAUNCH, 0.0, None)]


def test_start_pins_the_clocks_zero_to_the_hosts_times():
    log = EventLog()
    log.start(lambda: 2.0)  # the container started two seconds ago
    assert log.now() == 2.0
    assert abs(log.started_unix_ms - (time.time() - 2.0) * 1000) < 1000
    assert abs(log.started_monotonic - (time.monotonic() - 2.0)) < 1


def test_drop_removes_those_very_events_and_arrival_order_renumbers():
    log = EventLog()
    a = log.ours(5.0, EVAL_FREEZE, index=0)
    twin = log.ours(5.0, EVAL_FREEZE, index=0)  # equal field for field but seq
    late = log.ours(1.0, "in_flight")  # stamped in the window, handled after it
    log.drop([a])
    assert log.events == [twin, late]
    assert [(e.key, e.seq) for e in log.in_arrival_order()] == [("in_flight", 0), (EVAL_FREEZE, 1)]
    assert late.seq == 2  # the log's own events are not renumbered


# -- the evaluation queue ---------------------------------------------------------------------
def _plan(tmp_path: Path, full_curve: bool = False):
    from runner.options import ReproduceOptions
    from runner.plan import RunData, make_plan

    plan = make_plan(ROOT / "entries" / "mnist-cnn-cpu", ReproduceOptions(seed=1, full_curve=full_curve))
    plan = plan.resolved(gpus=0, backends=["torch"], image="img", data=RunData(tmp_path, tmp_path, "sha256:0"))
    plan = plan.for_run(1, tmp_path / "run", tmp_path / "scratch")
    plan.output_dir.mkdir(parents=True)
    return plan


class Answers(EvaluationQueue):
    """The queue with the evaluator's answers given: which copies meet the threshold."""

    def __init__(self, plan, meeting: set[int]):
        from runner.run.progress import TrainingProgress

        super().__init__(None, plan, None, TrainingProgress(plan.entry.task, "train"), [])
        self.meeting, self.asked = meeting, []

    def evaluate_checkpoint(self, index, name):
        self.asked.append(index)
        return {"problem": None, "score": index}, 0.99 if index in self.meeting else 0.5, index in self.meeting


def _hold(queue: EvaluationQueue, log: EventLog, index: int) -> Pending:
    copied = queue.copy(index, f"ckpt{index}.pt")
    assert copied.problem is None, copied.problem
    job = Pending(index, copied.name, log.ours(index, EVAL_FREEZE, index=index),
                  log.ours(index + 0.5, EVAL_THAW, index=index))
    queue.hold(job)
    return job


def test_requests_beyond_the_limit_are_refused_and_said_once(tmp_path):
    queue = Answers(_plan(tmp_path), set())
    assert [queue.admit() for _ in range(MAX_EVALUATIONS)] == list(range(MAX_EVALUATIONS))
    assert queue.admit() is None and queue.admit() is None
    assert queue.notes == [f"evaluation requests beyond {MAX_EVALUATIONS} were ignored"]
    assert queue.requests == MAX_EVALUATIONS + 2  # the final model's index comes after every request


def test_a_checkpoint_is_copied_and_hashed_and_a_name_outside_output_is_a_problem(tmp_path):
    plan = _plan(tmp_path)
    (plan.output_dir / "model.pt").write_bytes(b"weights")
    queue = Answers(plan, set())
    copied = queue.copy(3, "model.pt")
    assert (copied.name, copied.problem) == ("3.pt", None)
    assert copied.digest == hashlib.sha256(b"weights").hexdigest()
    assert (plan.checkpoints_dir / "3.pt").read_bytes() == b"weights"
    for bad in ("../secret.pt", "missing.pt", None):
        refused = queue.copy(4, bad)
        assert refused.digest is None and refused.problem
    assert queue.predictions(3) == "evaluations/3/clean.npy"


@pytest.mark.parametrize("full_curve", [False, True])
def test_evaluations_stop_at_the_crossing_unless_the_whole_curve_is_asked(tmp_path, full_curve):
    plan = _plan(tmp_path, full_curve)
    for i in range(4):
        (plan.output_dir / f"ckpt{i}.pt").write_bytes(bytes([i]))
    queue, log = Answers(plan, meeting={1, 3}), EventLog()
    jobs = [_hold(queue, log, i) for i in range(4)]
    dropped = queue.evaluate_pending()
    assert queue.crossing_checkpoint == (1, "1.pt") and queue.crossed and queue.pending == []
    if full_curve:
        assert queue.asked == [0, 1, 2, 3] and dropped == [] and queue.crossing_note() is None
        assert all(job.thaw.metadata["score"] == job.index for job in jobs)
    else:
        assert queue.asked == [0, 1] and queue.after_crossing == 2
        assert dropped == [jobs[2].freeze, jobs[2].thaw, jobs[3].freeze, jobs[3].thaw]
        assert sorted(p.name for p in plan.checkpoints_dir.iterdir()) == ["0.pt", "1.pt"]
        assert queue.crossing_note().startswith("2 evaluation request(s) after the crossing")


def test_an_interrupted_run_evaluates_nothing_and_says_why(tmp_path):
    plan = _plan(tmp_path)
    (plan.output_dir / "ckpt0.pt").write_bytes(b"0")
    queue, log = Answers(plan, meeting={0}), EventLog()
    job = _hold(queue, log, 0)
    assert queue.evaluate_pending(interrupted=True) == []
    assert queue.asked == [] and not queue.crossed
    assert job.thaw.metadata["problem"] == "not evaluated: the run was interrupted"


# -- the freezer, without a container --------------------------------------------------------
def test_before_rank_zero_runs_there_is_nothing_to_freeze_or_stop():
    notes: list[str] = []
    freezer = Freezer(0, lambda: 0.0, notes)
    assert freezer.freeze() == "exited" and freezer.ranks("exited") == {}
    freezer.thaw("frozen")
    freezer.stop_rank0()
    assert notes == []


# -- the freezer and the evidence, against a real container ----------------------------------
class Unconfirmed:
    """A group of other ranks one of which does not confirm its pause (a node that answers late)."""

    on_failure = None

    def __init__(self):
        self.asked: list[str] = []

    def start(self) -> None:
        pass

    def each(self, action: str) -> dict[int, str] | None:
        self.asked.append(action)
        return {1: "running"}  # rank 1 says it still runs

    def stop(self, grace_s: float = 60) -> str | None:
        return None


@pytest.fixture
def busy(engine, cpu_base_image):
    """A running container of the session's engine that spins one core."""
    from runner.engine.interface import ContainerSpec

    spec = ContainerSpec(image=cpu_base_image.tag, command=["python3", "-c", "while True: pass"], mounts=[],
                         workdir=None, cpus=1, timeout_s=120, label="train")
    container = engine.create(spec)
    container.start()
    try:
        yield container
    finally:
        for step in (container.stop, container.remove):
            try:
                step()
            except Exception:  # noqa: BLE001 - clean-up: gone already
                pass


@pytest.mark.docker
def test_a_frozen_container_is_paused_and_its_cpu_time_stands_still(busy):
    from runner.run.evidence import Evidence

    notes: list[str] = []
    freezer, evidence = Freezer(0, lambda: 0.0, notes), Evidence(0)
    freezer.container = busy
    evidence.start(busy, [])
    evidence.peers_started()
    try:
        time.sleep(1.0)
        assert freezer.freeze() == "frozen" and busy.state().status == "paused"
        first = evidence.training_work()
        time.sleep(1.0)
        second = evidence.training_work()
        assert first["cpu_seconds"] is not None and first["cpu_seconds"] > 0.2, first
        assert second["cpu_seconds"] - first["cpu_seconds"] < 0.05  # frozen: no work
        freezer.thaw("frozen")
        assert busy.state().status == "running"
        time.sleep(1.0)
        assert evidence.training_work()["cpu_seconds"] - second["cpu_seconds"] > 0.2
        busy.stop()
        busy.remove()
        assert freezer.freeze() == "exited"
        assert notes == []
    finally:
        evidence.close()


@pytest.mark.docker
def test_a_rank_that_does_not_confirm_its_pause_leaves_the_run_running(busy):
    notes: list[str] = []
    group = Unconfirmed()
    freezer = Freezer(0, lambda: 0.0, notes)
    freezer.container, freezer.peers = busy, [group]
    assert freezer.freeze() == "running"
    assert busy.state().status == "running"  # rank 0 was thawed again
    assert group.asked == ["pause", "unpause"]
    assert len(notes) == 1 and "not confirmed by every rank" in notes[0]
