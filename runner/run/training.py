"""The training phase: run the entry's container under the contract, keep its clock, and
evaluate the checkpoints it asks to have evaluated.

The clock starts at the launch stamp of the runner's launcher. When the entry asks for
an evaluation (an ``eval_request`` event naming a checkpoint under /output), the runner
freezes the training container (the engine's ``freeze``: the cgroup freezer), copies and hashes
the checkpoint, and thaws the container. Only the frozen time is excluded from TTA; the
runner's own events record it. The copies are evaluated after the container exited, in
order, up to the first that meets the threshold: the evaluator's forward passes never
share the entry's cores, and the TTA is the same as if each had been evaluated in its
window (it counts training time only). The evaluator starts beside the entry at the lowest
CPU weight and waits frozen (``evaluator.py``).
"""

from __future__ import annotations

import queue
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from runner import paths
from runner.engine.containers import ContainerOutcome, ContainerSpec, Mount, prepare_writable, run_container
from runner.engine.interface import Engine
from runner.events import Event, write_events
from runner.plan import SeedRun
from runner.run.allocation import NodesVerdict, judge_nodes
from runner.run.evaluation_queue import EvaluationQueue, Pending
from runner.run.evaluator import Evaluator
from runner.run.event_log import EventLog
from runner.run.evidence import Evidence
from runner.run.freezer import Freezer, RankGroup
from runner.run.init_weights import INIT_MOUNT, ensure_init
from runner.run.multiprocess import Peers, rank_spec
from runner.run.progress import EPOCH_COUNT, TrainingProgress, earlier_run
from runner.run.remote_nodes import NodeError, RemoteNodes
from runner.score.tta import CONTAINER_EXIT, EVAL_FREEZE, EVAL_THAW

if TYPE_CHECKING:
    from runner.engine.interface import Container

LAUNCHER_MOUNT = "/opt/runner/launch"
EVAL_REQUEST = "eval_request"
EVALUATOR_START = "evaluator_start"


@dataclass
class TrainingRun:
    events: list[Event]
    outcome: ContainerOutcome
    final: dict | None = None  # the evaluator's predictions for the final model
    # the checkpoint-sensitivity evaluations (the crossing checkpoint's and the final model's)
    sensitivity: list[dict] = field(default_factory=list)
    started_unix_ms: int | None = None  # the host's unix time at the events' t = 0
    notes: list[str] = field(default_factory=list)  # what the runner refused or could not do
    started_monotonic: float | None = None  # the host's monotonic time at the events' t = 0 (energy)
    nodes: NodesVerdict | None = None  # a run spanning nodes: what its other nodes turned out to be


class _TrainingSession:
    """Everything the host does while the training container runs, in arrival order: it
    wires the event log (the clock), the freezer, the evaluation queue and the evidence."""

    def __init__(self, engine: Engine, plan: SeedRun, labels, progress: TrainingProgress):
        self.progress = progress
        self.notes: list[str] = []  # what the runner refused or could not do
        self.log = EventLog()
        self.freezer = Freezer(plan.limits.gpus, self.log.now, self.notes)
        self.evaluator = Evaluator(engine, plan)
        self.queue = EvaluationQueue(self.evaluator, plan, labels, progress, self.notes)
        self.evidence = Evidence(plan.limits.gpus)

    def started(self, container: Container, clock: Callable[[], float]) -> None:
        self.log.start(clock)
        self.freezer.container = container
        self.evidence.start(container, self.freezer.peers)
        for group in self.freezer.peers:
            group.start()
        self.evidence.peers_started()

    def peer_failed(self, who: str, why: str | None) -> None:
        """A rank (or a node) ended badly: stop rank 0, whose collectives would wait for it forever."""
        self.notes.append(f"{who} ended: {why}; rank 0 was stopped")
        self.freezer.stop_rank0()

    def note_evaluator_start(self) -> None:
        """When, on the entry's clock, the prestarted evaluator was ready and then frozen (an
        ``evaluator_start`` event at that time; ``ready_at`` negative: before the entry's
        container started, past the container's exit: it finished starting after the entry)."""
        ev, started = self.evaluator, self.log.started_monotonic
        if started is None or ev.ready_at is None:
            return
        self.log.ours(max(0.0, ev.ready_at - started), EVALUATOR_START,
                      ready_at=round(ev.ready_at - started, 6),
                      frozen_at=round(ev.frozen_at - started, 6) if ev.frozen_at else None)

    def on_line(self, line: str, t: float) -> None:
        ev = self.log.entry_line(line, t)
        if ev is None:
            return
        if ev.key == EVAL_REQUEST:
            self.evaluate_request(ev)
        elif ev.key == "epoch_start" and isinstance(ev.metadata.get("epoch_num"), int):
            self.progress.update(epoch=ev.metadata["epoch_num"], elapsed=t)
        elif ev.key == EPOCH_COUNT and isinstance(ev.value, int) and not isinstance(ev.value, bool) and ev.value > 0:
            self.progress.update(epochs=ev.value, elapsed=t)  # MLPerf's key: the estimate of the rest uses it
        else:
            self.progress.update(elapsed=t)

    def evaluate_request(self, request: Event) -> None:
        """One evaluation request: freeze, copy, thaw. Which checkpoint crosses is known only
        after the container exits: every request is copied (up to the limit), and those after
        the crossing are dropped then."""
        index = self.queue.admit()
        if index is None:
            return
        checkpoint, epoch = request.metadata.get("checkpoint"), request.metadata.get("epoch_num")
        state = self.freezer.freeze()
        paused_t = self.log.now()
        gpu = self.freezer.wait_for_gpus(state, paused_t, index)
        excluded = state != "running" and not (gpu and not gpu["gpu_idle"])
        freeze = self.log.ours(
            paused_t, EVAL_FREEZE, index=index, request_seq=request.seq,
            epoch=epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else None,
            checkpoint=checkpoint if isinstance(checkpoint, str) else None,
            frozen=excluded, state=state, **self.freezer.ranks(state), **gpu, **self.evidence.training_work(),
        )
        try:
            copied = self.queue.copy(index, checkpoint)
        finally:
            t = self.log.now()  # the excluded window ends before any rank runs again
            self.freezer.thaw(state)
        thaw = self.log.ours(t, EVAL_THAW, index=index, checkpoint_sha256=copied.digest, problem=copied.problem,
                             predictions=self.queue.predictions(index))
        if copied.problem is None:
            self.queue.hold(Pending(index, copied.name, freeze, thaw))
        self.progress.update(elapsed=t, evaluated=True)

    def after_exit(self, outcome: ContainerOutcome) -> tuple[dict | None, list[dict]]:
        """The evaluations, once every rank is gone: the copied checkpoints, then the final
        model and the sensitivity checks; (the final model's record, the sensitivity records)."""
        self.evaluator.stay_awake()  # no clock runs any more
        self.log.drop(self.queue.evaluate_pending(interrupted=outcome.interrupted))
        final = self.queue.evaluate_final() if outcome.ok else None
        sensitivity = self.queue.evaluate_sensitivity() if outcome.ok or self.queue.crossing_checkpoint else []
        self.note_evaluator_start()
        return final, sensitivity

    def close(self) -> None:
        self.evidence.close()
        self.evaluator.close()
        self.freezer.close()


def run_training(engine: Engine, plan: SeedRun, labels) -> TrainingRun:
    """Train in one container, or in one per rank when the entry asks for several processes
    (on this host, or across the nodes of a Slurm allocation)."""
    spec = training_spec(plan)
    world_size = plan.entry.world_size
    if world_size <= 1:
        return _train(engine, plan, labels, spec, [])
    if plan.entry.nodes > 1:
        return _train_across_nodes(engine, plan, labels, spec)
    ranks = [rank_spec(spec, plan.run_name, None, r, world_size, plan.limits.gpus) for r in range(world_size)]
    return _train(engine, plan, labels, ranks[0], [Peers(engine, ranks[1:], plan.result_dir, None)])


def _train_across_nodes(engine: Engine, plan: SeedRun, labels, spec: ContainerSpec) -> TrainingRun:
    """Rank 0 (and this node's other ranks) here; the other nodes' ranks through their agents,
    which are sent the run's plan and started once rank 0 runs. A node that cannot start
    refuses the run before rank 0 does."""
    entry = plan.entry
    per_node = entry.processes_per_node
    local = [rank_spec(spec, plan.run_name, plan.network, r, entry.world_size, plan.limits.gpus, per_node)
             for r in range(per_node)]
    remote = RemoteNodes(entry.nodes, plan.to_dict(), None, list(plan.runner), plan.log("srun.log"))
    try:
        try:
            verdict = judge_nodes(plan, remote.open())
        except NodeError as err:
            verdict = NodesVerdict(refusal=str(err))
        if verdict.refusal:  # nothing of the entry ran: no events but this empty stream
            write_events(plan.result_dir / "events.jsonl", [])
            return TrainingRun([], ContainerOutcome(None, False, False, 0.0,
                                                    f"the run's other nodes: {verdict.refusal}"), nodes=verdict)
        groups = [Peers(engine, local[1:], plan.result_dir, None)] if per_node > 1 else []
        return replace(_train(engine, plan, labels, local[0], [*groups, remote]), nodes=verdict)
    finally:
        remote.close()


def training_spec(plan: SeedRun) -> ContainerSpec:
    """The run's training container (rank 0's, in a run of several processes): the launcher
    first, the training data (and the declared public inputs, read-only), the runner's initial
    weights (read-only, ``/init``), a writable /output.
    Another node passes its plan as it resolved there (the image, data and public inputs it
    found)."""
    prepare_writable(plan.output_dir)
    init = ensure_init(plan)
    return ContainerSpec(
        image=plan.image,
        command=plan.entry.train.command,
        entrypoint=["/bin/sh", f"{LAUNCHER_MOUNT}/launch.sh"],
        mounts=[
            Mount(plan.data.train_dir, "/data/train"),
            Mount(paths.launcher_dir(), LAUNCHER_MOUNT),
            Mount(plan.output_dir, "/output", read_only=False),
            *(Mount(Path(host), container) for host, container in plan.data.public),
            *([Mount(init, INIT_MOUNT)] if init else []),
        ],
        env={**plan.train_env(), **({"RUNNER_INIT": INIT_MOUNT} if init else {})},
        cpus=plan.limits.cpus,
        memory=plan.limits.memory,
        gpus=plan.limits.gpus,
        timeout_s=plan.limits.timeout_s,
        label="train",
    )


def _train(engine: Engine, plan: SeedRun, labels, spec: ContainerSpec, peers: list[RankGroup]) -> TrainingRun:
    """``peers``: the other ranks' groups (``Peers``, ``RemoteNodes``), started with rank 0."""
    lines: queue.Queue = queue.Queue()
    expected = earlier_run(paths.results_dir(), plan.entry.name, plan.smoke)  # the estimate of the rest
    with TrainingProgress(plan.entry.task, "train", expected=expected, timeout_s=plan.limits.timeout_s) as progress:
        session = _TrainingSession(engine, plan, labels, progress)
        for group in peers:
            group.on_failure = session.peer_failed
        session.freezer.peers = peers

        def listen() -> None:
            while (item := lines.get()) is not None:
                try:
                    session.on_line(*item)
                except Exception as exc:  # noqa: BLE001 - recorded: a lost event must not pass silently
                    session.notes.append(f"the runner failed on an output line: {type(exc).__name__}: {exc}")

        listener = threading.Thread(target=listen, name="runner-train-events", daemon=True)
        listener.start()
        outcome = None
        exited: list[float] = []  # rank 0's stop, once
        problems: list[str | None] = []

        def stop_peers(ended: bool) -> None:
            """Rank 0 has stopped: the other ranks end (or are stopped) before it is removed,
            since they share its network namespace. Runs once; a second call does nothing."""
            if exited:
                return
            exited.append(session.log.now())
            problems.extend(group.stop(60 if ended else 0) for group in peers)

        try:
            # The evaluator's container starts first; it gets ready beside the entry's start-up
            # at the lowest CPU weight and is frozen: the evaluations after the container
            # exits pay none of its start-up. The entry's container is created meanwhile and
            # started once the evaluator's runs.
            session.evaluator.launch()
            try:
                outcome = run_container(
                    engine, spec, lambda line, t: lines.put((line, t)),
                    plan.log("train.log"), on_started=session.started,
                    before_remove=stop_peers, before_start=session.evaluator.until_running,
                )
                exit_t = exited[0] if exited else session.log.now()
            finally:
                stop_peers(False)  # a no-op unless rank 0 could not even be created or started
                peer_problem = next((p for p in problems if p), None)
                lines.put(None)
                listener.join()
            if peer_problem and not outcome.interrupted:
                outcome = ContainerOutcome(None, outcome.timed_out, False, outcome.wall_seconds, peer_problem)
            session.log.ensure_launch()
            session.log.ours(exit_t, CONTAINER_EXIT, exit_code=outcome.exit_code)
            progress.exited(exit_t)  # the checkpoints are scored now
            final, sensitivity = session.after_exit(outcome)
        finally:
            session.close()
    shutil.rmtree(plan.requests_dir, ignore_errors=True)
    if note := session.queue.crossing_note():
        session.notes.append(note)
    events = session.log.in_arrival_order()
    write_events(plan.result_dir / "events.jsonl", events)
    return TrainingRun(events, outcome, final, sensitivity=sensitivity, started_unix_ms=session.log.started_unix_ms,
                       notes=session.notes, started_monotonic=session.log.started_monotonic)
