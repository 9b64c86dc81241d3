"""The one place that reads a result folder for MLPerf: ``result.json`` and ``events.jsonl``
into an ``MlperfRun``. When the result's layout changes, only this module changes.

Times: events carry ``t``, seconds since the training container started on the host's
monotonic clock. The run's unix start is ``training.wall_clock_start_unix_ms`` when the
result records it, else the run id's UTC stamp (taken by the host just before the run, to
the second). ``init_start`` is the container start (t = 0); ``init_stop`` and ``run_start``
are the runner's launch stamp, where its TTA clock starts (everything the entry does is on
the clock); evaluations are the runner's own scores of each checkpoint, with the host's
freeze/thaw times; ``run_stop`` is the container's exit. Only the runner's events are
read: nothing the entry printed moves these times.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from runner.errors import UserError
from runner.mlperf.config import SubmissionConfig, load_submission
from runner.mlperf.training_log import TASK_BENCHMARK, Epoch, Evaluation, MlperfRun
from runner.tasks import TASKS

# Training-set sizes of the public data sets (what a conforming run trains on).
PUBLIC_TRAIN_SIZE = {t.id: t.public_train_size for t in TASKS.values() if t.public_train_size}


def read_result(result_dir: Path) -> dict:
    path = Path(result_dir) / "result.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"{result_dir} has no result.json", "pass a result folder written by 'runner reproduce'") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{path} is not valid JSON ({exc.msg})", "restore it from its signed bundle") from None


def _events(result_dir: Path) -> list[dict]:
    path = Path(result_dir) / "events.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _run_id_unix_ms(run_id: str) -> int:
    stamp = datetime.strptime(run_id.split("-")[0], "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)
    return int(stamp.timestamp() * 1000)


def mlperf_run_from_result(result_dir: Path, submission: SubmissionConfig | None = None,
                           result: dict | None = None) -> MlperfRun:
    """The MLPerf run of the result in ``result_dir`` (``result``: its record, when the run is
    not written yet; read from the folder otherwise)."""
    result_dir = Path(result_dir)
    result = result if result is not None else read_result(result_dir)
    training = result.get("training") or {}
    task = result.get("task") or {}
    run_id = result.get("run_id", "")
    if not training.get("evaluations"):
        raise UserError(f"{run_id or result_dir} has no scored evaluations ({result.get('status')})",
                        "export only runs whose training finished and was scored")
    task_id = task.get("id")
    if not isinstance(task_id, str) or (benchmark := TASK_BENCHMARK.get(task_id)) is None:
        raise UserError(f"task {task.get('id')!r} has no MLPerf training benchmark to report under",
                        f"export a result of one of: {', '.join(sorted(TASK_BENCHMARK))}")

    events = _events(result_dir)
    first: dict[str, dict] = {}  # each key's first event
    for ev in events:
        first.setdefault(ev["key"], ev)
    starts = {ev["metadata"].get("epoch_num"): ev["t"] for ev in events if ev["key"] == "epoch_start"}
    stops = {ev["metadata"].get("epoch_num"): ev["t"] for ev in events if ev["key"] == "epoch_stop"}
    epochs = [Epoch(int(n), starts[n], stops[n]) for n in sorted(starts, key=int) if n in stops and isinstance(n, int)]

    metric = task["metric"]
    evaluations = [
        Evaluation(int(ev["epoch"]), float(ev["stop"]), float(ev["scores"][metric]), float(ev["start"]))
        for ev in training["evaluations"]
        if ev.get("epoch") is not None and metric in (ev.get("scores") or {}) and not ev.get("problem")
    ]
    ours = {ev["key"]: ev for ev in events if ev.get("origin") == "runner"}
    run_start_t = float(training.get("launch_seconds") or 0.0)
    if not epochs:  # the entry printed no epoch markers: each span up to an evaluation is one
        bounds = [run_start_t] + [e.start_t if e.start_t is not None else e.t for e in evaluations]
        epochs = [Epoch(e.epoch_num, bounds[i], bounds[i + 1]) for i, e in enumerate(evaluations)]
    last_t = max([run_start_t, *(e.stop_t for e in epochs), *(e.t for e in evaluations)])
    run_stop_t = float(ours["container_exit"]["t"]) if "container_exit" in ours else last_t
    batch = (first.get("global_batch_size") or {}).get("value")
    return MlperfRun(
        benchmark=benchmark,
        submission=submission if submission is not None else load_submission(),
        wall_clock_start_unix_ms=int(training.get("wall_clock_start_unix_ms") or _run_id_unix_ms(run_id)),
        init_start_t=0.0,
        init_stop_t=run_start_t,
        run_start_t=run_start_t,
        epochs=epochs,
        evaluations=evaluations,
        run_stop_t=max(run_stop_t, last_t),
        status="success" if training.get("reached") else "aborted",
        seed=int(result.get("seed", 0)),
        global_batch_size=batch if isinstance(batch, int) else None,
        train_samples=int(training.get("train_samples") or PUBLIC_TRAIN_SIZE.get(task_id, 0)),
        eval_samples=int(task.get("eval_size") or 0),
        extra={"run_id": run_id, "task": task.get("id"), "threshold": task.get("threshold"),
               "smoke": bool(result.get("smoke"))},
    )
