"""Class 2c: the freeze covers the GPU. The idle wait with a fake NVML reader (busy for N
samples, then idle), the eval_freeze fields it gives, TTA and verify with the tail counted
as training, and old event streams (no tail) still valid. The real reader runs in tests/gpu."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.events import runner_event
from runner.run.gpu_freeze import GpuActivity, GpuFreeze, GpuTail, wait_until_idle
from runner.score.tta import EVAL_FREEZE, EVAL_THAW, LAUNCH, CONTAINER_EXIT, EventStreamError, time_to_accuracy, timeline


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class BusyThenIdle:
    """Busy for ``busy`` readings (SM 100 %, or only a process sample), then idle."""

    def __init__(self, busy: int, how: str = "sm"):
        self.busy, self.how, self.reads = busy, how, 0

    def read(self, indices):
        self.reads += 1
        busy = self.reads <= self.busy
        if self.how == "pid":
            return [GpuActivity(i, 0, 0, (4242,) if busy else ()) for i in indices]
        return [GpuActivity(i, 100 if busy else 0, 0) for i in indices]


def test_the_tail_runs_until_the_gpus_settle_idle():
    clock = FakeClock()
    tail = wait_until_idle(BusyThenIdle(50), [0, 1], settle_s=0.25, interval_s=0.02, limit_s=60,
                           clock=clock, sleep=clock.sleep)
    assert tail.idle and tail.busy_samples == 50
    # 50 busy readings (1.0 s), then idle readings for the settle time: all of it is the tail
    assert tail.busy_seconds == pytest.approx(0.98)
    assert tail.tail_seconds == pytest.approx(1.0 + 0.26, abs=0.03)
    assert tail.tail_seconds >= tail.busy_seconds + 0.25
    assert tail.event_fields()["gpu_idle"] is True


def test_a_process_still_computing_keeps_the_gpu_busy_even_at_zero_utilisation():
    clock = FakeClock()
    tail = wait_until_idle(BusyThenIdle(10, "pid"), [0], settle_s=0.1, interval_s=0.02, limit_s=60,
                           clock=clock, sleep=clock.sleep)
    assert tail.idle and tail.busy_samples == 10 and tail.tail_seconds > 0.2


def test_an_idle_gpu_costs_only_the_settle_time():
    clock = FakeClock()
    tail = wait_until_idle(BusyThenIdle(0), [0], settle_s=0.25, interval_s=0.05, limit_s=60,
                           clock=clock, sleep=clock.sleep)
    assert tail.idle and tail.busy_samples == 0 and 0.25 <= tail.tail_seconds <= 0.3 + 1e-9


def test_a_gpu_that_never_idles_within_the_limit_is_not_idle():
    clock = FakeClock()
    tail = wait_until_idle(BusyThenIdle(10**9), [0], settle_s=0.25, interval_s=0.5, limit_s=5,
                           clock=clock, sleep=clock.sleep)
    assert not tail.idle and tail.tail_seconds >= 5


def test_a_failing_reader_is_not_idle_and_says_why():
    class Broken:
        def read(self, indices):
            raise RuntimeError("GPU is lost")

    tail = wait_until_idle(Broken(), [0])
    assert not tail.idle and "GPU is lost" in tail.error and tail.event_fields()["gpu_error"]


# -- the training session stamps the tail -----------------------------------------------
def _plan(tmp_path: Path, gpus: int, framework: str = "pytorch"):
    """The plan of one run of the default entry, as if its host had ``gpus`` GPUs."""
    from dataclasses import replace

    from runner.options import ReproduceOptions
    from runner.plan import RunData, make_plan

    plan = make_plan(Path(__file__).resolve().parents[1] / "entries" / "mnist-cnn-cpu", ReproduceOptions(seed=1))
    plan = replace(plan, entry=replace(plan.entry, framework={**plan.entry.framework, "name": framework}))
    return plan.resolved(gpus=gpus, backends=["torch"], image="img",
                         data=RunData(tmp_path, tmp_path, "sha256:0")).for_run(1, tmp_path, tmp_path)


def _session(tmp_path: Path, gpus: int):
    from runner.run.progress import TrainingProgress
    from runner.run.training import _TrainingSession

    plan = _plan(tmp_path, gpus)
    return _TrainingSession(None, plan, None, TrainingProgress(plan.entry.task, "train"))


def test_the_session_waits_for_the_gpus_after_a_pause_and_records_the_tail(tmp_path, monkeypatch):
    monkeypatch.setenv("RUNNER_GPU_SETTLE_S", "0.01")
    monkeypatch.setenv("RUNNER_GPU_IDLE_INTERVAL_S", "0.001")
    freezer = _session(tmp_path, gpus=1).freezer
    assert isinstance(freezer.gpu_freeze, GpuFreeze) and freezer.gpu_freeze.indices == [0]
    freezer.gpu_freeze = GpuFreeze(1, BusyThenIdle(20))
    import time

    t0 = time.monotonic()
    freezer.clock = lambda: time.monotonic() - t0
    fields = freezer.wait_for_gpus("frozen", 0.0, 0)
    assert fields["gpu_idle"] is True and fields["gpu_busy_samples"] == 20
    assert fields["gpu_tail_seconds"] >= 0.01
    assert freezer.wait_for_gpus("running", 0.0, 1) == {}  # nothing frozen: no wait


def test_a_run_without_gpus_never_waits(tmp_path):
    freezer = _session(tmp_path, gpus=0).freezer
    assert freezer.gpu_freeze is None and freezer.wait_for_gpus("frozen", 0.0, 0) == {}


def test_gpus_not_idle_make_the_evaluation_count(tmp_path):
    session = _session(tmp_path, gpus=1)

    class NeverIdle:
        def after_pause(self):
            return GpuTail(False, 300.0, 300.0, 100, 100, [0])

        def close(self):
            pass

    session.freezer.gpu_freeze = NeverIdle()
    session.freezer.clock = lambda: 0.5
    fields = session.freezer.wait_for_gpus("frozen", 0.0, 3)
    assert fields["gpu_idle"] is False
    assert any("evaluation 3" in n and "class 2c" in n for n in session.notes)  # the session's notes


# -- TTA from events with a tail ------------------------------------------------------------
def _stream(tail: float | None, frozen: bool = True) -> list[Event]:
    freeze = {"index": 0, "frozen": frozen, "state": "frozen"}
    if tail is not None:
        freeze.update(gpu_tail_seconds=tail, gpu_idle=True)
    return [
        runner_event(0, 0.2, LAUNCH, stamp="launcher"),
        runner_event(1, 10.0, EVAL_FREEZE, **freeze),
        runner_event(2, 14.0, EVAL_THAW, index=0, predictions="evaluations/0/clean.npy"),
        runner_event(3, 20.0, CONTAINER_EXIT, exit_code=0),
    ]


def test_the_gpu_tail_counts_as_training_time():
    line = timeline(_stream(1.5))
    e = line.evaluations[0]
    assert e.paused_at == 10.0 and e.start == 11.5 and e.gpu_tail_seconds == 1.5
    tta = time_to_accuracy(line, [True])
    assert tta.excluded_eval_seconds == pytest.approx(2.5)
    assert tta.seconds == pytest.approx(14.0 - 0.2 - 2.5)


def test_an_old_stream_without_the_field_is_still_valid_and_unchanged():
    line = timeline(_stream(None))
    assert line.evaluations[0].gpu_tail_seconds == 0.0 and line.evaluations[0].start == 10.0
    assert time_to_accuracy(line, [True]).seconds == pytest.approx(14.0 - 0.2 - 4.0)


@pytest.mark.parametrize("tail", [-1.0, "1", float("nan"), 4.5])
def test_a_tail_that_is_negative_not_a_number_or_past_the_thaw_is_refused(tail):
    with pytest.raises(EventStreamError):
        timeline(_stream(tail))


def test_the_scored_record_carries_the_tail_only_when_there_is_one():
    from runner.score.evaluations import ScoredEvaluation

    base = dict(index=0, epoch=None, start=1.0, stop=2.0, predictions="p", count=1, scores={}, meets=False)
    assert "gpu_tail_seconds" not in ScoredEvaluation(**base).to_dict()
    assert ScoredEvaluation(**base, gpu_tail_seconds=0.5).to_dict()["gpu_tail_seconds"] == 0.5


def test_verify_rejects_a_result_whose_evaluation_hides_the_tail():
    from types import SimpleNamespace

    from runner.verify.timing import check_events_order

    events = _stream(1.5)
    line = timeline(events)
    e = line.evaluations[0]
    honest = {"predictions": e.predictions, "epoch": None, "checkpoint_sha256": None, "excluded": True,
              "start": e.start, "stop": e.stop, "gpu_tail_seconds": 1.5}
    ev = SimpleNamespace(timeline=line, claimed_evaluations=[honest], events=events)
    assert check_events_order(ev).ok
    widened = {**honest, "start": 10.0, "gpu_tail_seconds": 0.0}  # the window claimed from the pause
    ev = SimpleNamespace(timeline=line, claimed_evaluations=[widened], events=events)
    assert not check_events_order(ev).ok


# -- the evaluator gets the run's GPUs -----------------------------------------------------
def _evaluator_spec(tmp_path: Path, gpus: int, framework: str = "pytorch"):
    from runner.run.evaluator import evaluator_spec

    return evaluator_spec(_plan(tmp_path, gpus, framework))


def test_the_evaluator_of_a_gpu_run_gets_the_runs_gpus_and_predicts_on_cuda(tmp_path):
    spec = _evaluator_spec(tmp_path, 2)
    assert spec.gpu_ids == ["0", "1"]  # the ids Docker's --gpus 2 gives the training container
    assert spec.command[-2:] == ["--device", "cuda"]


def test_a_cpu_run_evaluator_is_unchanged(tmp_path):
    spec = _evaluator_spec(tmp_path, 0)
    assert spec.gpu_ids is None and spec.gpus == 0 and "--device" not in spec.command


def test_only_pytorch_is_told_the_device(tmp_path):
    spec = _evaluator_spec(tmp_path, 1, "tensorflow")
    assert spec.gpu_ids == ["0"] and "--device" not in spec.command


def test_the_evaluator_refuses_cuda_where_no_gpu_is_visible():
    import torch

    from runner.harness.errors import HarnessError
    from runner.harness.frameworks.pytorch import TorchModel

    model = TorchModel("pytorch", torch.__version__, torch.nn.Linear(2, 2), Path("w"), "0" * 64, "NCHW")
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is visible: tests/gpu covers the evaluator on it")
    with pytest.raises(HarnessError, match="none is visible"):
        model.to_device("cuda")
    model.to_device("cpu")  # a no-op
