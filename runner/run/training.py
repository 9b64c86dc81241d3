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
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from runner import paths
from runner.engine.containers import ContainerOutcome, ContainerSpec, Mount, prepare_writable, run_container
from runner.engine.interface import Engine, EngineError, NotFound
from runner.plan import EVALUATIONS_DIR, SeedRun
from runner.run import final_model
from runner.run.checkpoints import CheckpointError, copy_checkpoint
from runner.run.evaluator import Evaluator, EvaluatorError
from runner.run.allocation import NodesVerdict, judge_nodes
from runner.run.cpu_usage import ContainerCpu, Sampler
from runner.run.gpu_freeze import GpuFreeze, GpuWorkMeter
from runner.run.init_weights import INIT_MOUNT, ensure_init
from runner.run.multiprocess import Peers, rank_spec
from runner.run.remote_nodes import NodeError, RemoteNodes
from runner.events import Event, parse_line, runner_event, write_events
from runner.run.progress import EPOCH_COUNT, TrainingProgress, earlier_run
from runner.score.evaluations import primary_score, score_file
from runner.score.tta import CONTAINER_EXIT, EVAL_FREEZE, EVAL_THAW, LAUNCH, LAUNCH_GAP_LIMIT_S

LAUNCHER_MOUNT = "/opt/runner/launch"
LAUNCH_MARKER = ":::RUNNER launch"
EVAL_REQUEST = "eval_request"
EVALUATOR_START = "evaluator_start"
MAX_EVALUATIONS = 100  # each freezes the clock: an entry may not buy unlimited free time


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


@dataclass
class _Pending:
    """A checkpoint copied in its frozen window, to be evaluated after the container exits."""

    index: int
    name: str  # the runner's copy under checkpoints/
    freeze: Event
    thaw: Event  # completed with the evaluation's fields


class _TrainingSession:
    """Everything the host does while the training container runs, in arrival order."""

    def __init__(self, engine: Engine, plan: SeedRun, labels, progress: TrainingProgress):
        self.plan, self.task, self.labels, self.progress = plan, plan.entry.task, labels, progress
        self.output_dir = plan.output_dir
        self.checkpoints_dir = plan.checkpoints_dir
        self.events: list[Event] = []
        self.notes: list[str] = []
        self.container = None
        self.peers: list = []  # the other ranks: Peers on this host, RemoteNodes on other nodes
        self.started_unix_ms: int | None = None
        self.started_monotonic: float | None = None
        self.clock = lambda: 0.0
        self.seen_output = False
        self.evaluations = 0
        self.crossed = False  # an evaluation met the threshold: the clock has stopped
        self.after_crossing = 0  # requests not evaluated since (without full_curve)
        self.frozen_ranks: dict[int, str] = {}  # rank -> its state in the last freeze
        self.crossing_checkpoint: tuple[int, str] | None = None  # (index, the runner's copy)
        self.pending: list[_Pending] = []  # checkpoints copied, evaluated after the container exits
        self.final_checkpoint: str | None = None  # the runner's copy of the final model
        # A run with GPUs: each freeze also waits for them to be idle (class 2c).
        self.gpu_freeze = GpuFreeze(plan.limits.gpus) if plan.limits.gpus else None
        self.evaluator = Evaluator(engine, plan)
        # Evidence of training (class 4f): the training containers' CPU time at each freeze,
        # and with GPUs their busy time, both read by the host (``cpu_usage``, ``gpu_freeze``).
        self.cpu_counters: dict[int, ContainerCpu] = {}
        self.cpu_sampler = Sampler(self.cpu_counters)
        self.gpu_work = GpuWorkMeter(plan.limits.gpus) if plan.limits.gpus else None

    def add(self, event: Event) -> None:
        self.events.append(event)

    def ours(self, t: float, key: str, **metadata) -> Event:
        event = runner_event(len(self.events), t, key, **metadata)
        self.add(event)
        return event

    def started(self, container, clock) -> None:
        self.container, self.clock = container, clock
        self.started_unix_ms = int((time.time() - clock()) * 1000)
        self.started_monotonic = time.monotonic() - clock()
        self.cpu_counters[0] = ContainerCpu(container)
        self.cpu_counters[0].sample()  # found while it surely runs; then read every 0.1 s
        self.cpu_sampler.start()
        for group in self.peers:
            group.start()
            for rank, peer in getattr(group, "containers", {}).items():
                self.cpu_counters.setdefault(rank, ContainerCpu(peer))
        if self.gpu_work is not None:
            self.gpu_work.start()

    def training_work(self) -> dict:
        """The ``eval_freeze`` fields of the work done so far (class 4f): ``cpu_seconds``, the
        CPU time every training container used (rank 0 and this host's other ranks, from their
        cgroups, read while frozen), and with GPUs ``gpu_work_seconds``. What could not be read
        is named in ``cpu_not_measured``, and ``cpu_seconds`` is then None (ranks on other nodes
        are never read: their agents keep no counter of the runner's)."""
        containers = {0: self.container}
        for group in self.peers:
            containers.update(getattr(group, "containers", {}))
        missing = [] if all(hasattr(group, "containers") for group in self.peers) else ["the ranks on other nodes"]
        total, read, stale = 0.0, 0, []
        for rank, container in sorted(containers.items()):
            counter = self.cpu_counters.setdefault(rank, ContainerCpu(container))
            if (seconds := counter.seconds()) is None:
                missing.append(f"rank {rank} ({counter.problem or 'its cgroup is gone'})")
            else:
                total, read = total + seconds, read + 1
                if counter.stale:
                    stale.append(rank)
        # Only the whole run's time is judged: a part of it is kept beside, under its own name.
        fields: dict = {"cpu_seconds": None if missing else round(total, 6)}
        if missing:
            fields.update(cpu_seconds_partial=round(total, 6) if read else None,
                          cpu_not_measured="; ".join(missing)[:300])
        if stale:  # gone before its request was handled: its last reading (at most 0.1 s old)
            fields["cpu_last_reading_ranks"] = stale
        if self.gpu_work is not None:
            fields["gpu_work_seconds"] = self.gpu_work.seconds()
        return fields

    def peer_failed(self, who: str, why: str | None) -> None:
        """A rank (or a node) ended badly: stop rank 0, whose collectives would wait for it forever."""
        self.notes.append(f"{who} ended: {why}; rank 0 was stopped")
        try:
            self.container.stop()
        except (AttributeError, EngineError):
            pass

    def note_evaluator_start(self) -> None:
        """When, on the entry's clock, the prestarted evaluator was ready and then frozen (an
        ``evaluator_start`` event at that time; ``ready_at`` negative: before the entry's
        container started, past the container's exit: it finished starting after the entry)."""
        ev = self.evaluator
        if self.started_monotonic is None or ev.ready_at is None:
            return
        self.ours(max(0.0, ev.ready_at - self.started_monotonic), EVALUATOR_START,
                  ready_at=round(ev.ready_at - self.started_monotonic, 6),
                  frozen_at=round(ev.frozen_at - self.started_monotonic, 6) if ev.frozen_at else None)

    # -- output lines ---------------------------------------------------------------------
    def on_line(self, line: str, t: float) -> None:
        if not self.seen_output:
            self.seen_output = True
            marker = line.strip() == LAUNCH_MARKER
            if marker and t <= LAUNCH_GAP_LIMIT_S:
                self.ours(t, LAUNCH, stamp="launcher")
                return
            # Something ran before the launcher spoke: the clock falls back to the start.
            self.ours(0.0, LAUNCH, stamp="container-start", marker_at=t if marker else None,
                      first_line=None if marker else line[:200])
            if marker:
                return
        ev = parse_line(line, len(self.events), t)
        if ev is None:
            return
        self.add(ev)
        if ev.key == EVAL_REQUEST:
            self.evaluate_request(ev)
        elif ev.key == "epoch_start" and isinstance(ev.metadata.get("epoch_num"), int):
            self.progress.update(epoch=ev.metadata["epoch_num"], elapsed=t)
        elif ev.key == EPOCH_COUNT and isinstance(ev.value, int) and not isinstance(ev.value, bool) and ev.value > 0:
            self.progress.update(epochs=ev.value, elapsed=t)  # MLPerf's key: the estimate of the rest uses it
        else:
            self.progress.update(elapsed=t)

    # -- freezing -----------------------------------------------------------------------
    def freeze(self) -> str:
        """"frozen", "exited" (nothing left to freeze) or "running" (the engine refused, or a
        rank was not confirmed paused: then nothing counts as frozen)."""
        try:
            self.container.freeze()
            self.frozen_ranks = {0: "paused"}
            for group in self.peers:
                states = group.each("pause")
                if states is None or any(s not in ("paused", "exited") for s in states.values()):
                    self.notes.append(f"a freeze was not confirmed by every rank ({states}): its evaluation time counts")
                    self.thaw("frozen")
                    return "running"
                self.frozen_ranks.update(states)
            return "frozen"
        except NotFound:
            return "exited"
        except EngineError:
            try:
                status = self.container.state().status
            except NotFound:
                return "exited"
            return "running" if status in ("running", "restarting") else "exited"

    def thaw(self, state: str) -> None:
        if state != "frozen":
            return
        for group in self.peers:
            group.each("unpause")
        try:
            self.container.thaw()
        except EngineError:
            pass  # removed meanwhile (a timeout or Ctrl-C): nothing to thaw

    def wait_for_gpus(self, state: str, paused_t: float, index: int) -> dict:
        """After a pause on a run with GPUs: wait until the run's GPUs are idle. The event
        fields say how long the busy tail was (``gpu_tail_seconds``, from the pause stamp to
        the excluded window's start, counted as training) and whether they settled idle at
        all (if not, nothing of this evaluation is excluded)."""
        if self.gpu_freeze is None or state != "frozen":
            return {}
        tail = self.gpu_freeze.after_pause()
        fields = tail.event_fields()
        fields["gpu_tail_seconds"] = round(max(0.0, self.clock() - paused_t), 6)
        if not tail.idle:
            why = tail.error or f"they were still busy {tail.tail_seconds:.1f} s after the pause"
            self.notes.append(f"evaluation {index}: the run's GPUs were not idle after the freeze ({why}); "
                              "its evaluation time counts (class 2c)")
        return fields

    # -- one evaluation request: freeze, copy, thaw -----------------------------------------
    def evaluate_request(self, request: Event) -> None:
        # Which checkpoint crosses is known only after the container exits: every request is
        # copied (up to the limit), and those after the crossing are dropped then.
        if self.evaluations >= MAX_EVALUATIONS:
            if self.evaluations == MAX_EVALUATIONS:
                self.notes.append(f"evaluation requests beyond {MAX_EVALUATIONS} were ignored")
            self.evaluations += 1
            return
        index = self.evaluations
        self.evaluations += 1
        checkpoint = request.metadata.get("checkpoint")
        state = self.freeze()
        paused_t = self.clock()
        epoch = request.metadata.get("epoch_num")
        ranks = {"ranks": {str(r): s for r, s in sorted(self.frozen_ranks.items())}} if self.peers and state == "frozen" else {}
        excluded, gpu = state != "running", self.wait_for_gpus(state, paused_t, index)
        if gpu and not gpu["gpu_idle"]:
            excluded = False
        freeze = self.ours(
            paused_t, EVAL_FREEZE, index=index, request_seq=request.seq,
            epoch=epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else None,
            checkpoint=checkpoint if isinstance(checkpoint, str) else None,
            frozen=excluded, state=state, **ranks, **gpu, **self.training_work(),
        )
        digest = problem = None
        name = f"{index}{Path(str(checkpoint)).suffix[:16]}"
        try:
            self.checkpoints_dir.mkdir(exist_ok=True)
            digest = copy_checkpoint(self.output_dir, checkpoint, self.checkpoints_dir / name)
        except (CheckpointError, OSError) as exc:
            problem = str(exc)
        finally:
            t = self.clock()  # the excluded window ends before any rank runs again
            self.thaw(state)
        suffix = "json" if self.task.inputs == "questions" else "npy"
        thaw = self.ours(t, EVAL_THAW, index=index, checkpoint_sha256=digest, problem=problem,
                         predictions=f"{EVALUATIONS_DIR}/{index}/clean.{suffix}")
        if problem is None:
            self.pending.append(_Pending(index, name, freeze, thaw))
        self.progress.update(elapsed=t, evaluated=True)

    # -- the evaluations, after the container exited ---------------------------------------
    def evaluate_pending(self, interrupted: bool = False) -> None:
        """Evaluate the checkpoints copied during training, in the order they were asked for,
        up to the first that meets the threshold (all of them with ``--full-curve``). They run
        after the container exited: no evaluation shares the entry's cores or runs on its
        clock, and the frozen windows hold only the copy. Each result completes its
        ``eval_thaw`` event; the windows of checkpoints after the crossing are dropped (the
        entry's requests stay in the stream) and counted in the notes."""
        for job in self.pending:
            if interrupted:
                job.thaw.metadata["problem"] = "not evaluated: the run was interrupted"
                continue
            if self.crossed and not self.plan.options.full_curve:
                self.after_crossing += 1
                self.events = [e for e in self.events if e is not job.freeze and e is not job.thaw]
                (self.checkpoints_dir / job.name).unlink(missing_ok=True)
                continue
            fields, score, meets = self.evaluate_checkpoint(job.index, job.name)
            job.thaw.metadata.update(fields)
            if meets and not self.crossed:
                self.crossing_checkpoint = (job.index, job.name)
            self.crossed = self.crossed or meets
            self.progress.update(score=score, scored=True)
        self.pending = []

    def evaluate_checkpoint(self, index: int, name: str) -> tuple[dict, float | None, bool]:
        """(the eval_thaw fields, the primary score, whether it meets the threshold) for the
        runner's copy ``name``: the clean set and the probe's items in one request, so the
        model the probe scores is the one the clean set scored (a model's first forward pass
        may do anything, once)."""
        answer, problem, score, meets = None, None, None, False
        try:
            answer = self.evaluator.evaluate(index, name, probe_items=self.probe_subset())
            _, scores, problem = score_file(self.task, self.plan.result_dir,
                                            f"{EVALUATIONS_DIR}/{answer.files['clean']}", self.labels)
            score = primary_score(self.task, scores)
            meets = problem is None and score is not None and self.task.meets(score)
        except EvaluatorError as exc:
            problem = str(exc)
        fields = {"problem": problem, "probe_predictions": None, "builder_seconds": None,
                  "predict_seconds": None, "provenance": None}
        if answer is not None:
            fields.update(final_model.answer_fields(answer, self.probe_subset()))
        return fields, score, meets

    # -- the probe ----------------------------------------------------------------------
    def probe_subset(self) -> tuple[int, int] | None:
        """(items, seed) of the probe's images a request predicts (a smaller set: all of them);
        None: every item (questions)."""
        return final_model.probe_subset(self.task, self.labels, self.plan.seed)

    def evaluate_final(self) -> dict | None:
        """The final model's record (not part of TTA): copied and hashed, and evaluated
        unless this run times no model (``runner.run.final_model``)."""
        record, self.final_checkpoint = final_model.evaluate_final(
            self.evaluator, self.plan, self.evaluations, self.probe_subset(), evaluate=self.plan.options.infer)
        return record

    def evaluate_sensitivity(self) -> list[dict]:
        """The crossing checkpoint and the evaluated final model once more, each with its
        tensors permuted (after training: nothing here is on the clock)."""
        jobs = []
        if self.crossing_checkpoint is not None:
            jobs.append(("crossing", *self.crossing_checkpoint))
        if self.final_checkpoint:
            jobs.append(("final", None, self.final_checkpoint))
        return final_model.evaluate_sensitivity(self.evaluator, self.plan, jobs, self.evaluations + 1)


def _in_arrival_order(events: list[Event]) -> list[Event]:
    """Lines that were in flight while the runner froze the entry are stamped inside the
    frozen window but handled after it: order every event by its host time."""
    ordered = sorted(events, key=lambda e: (e.t, e.seq))
    return [Event(**{**e.__dict__, "seq": i}) for i, e in enumerate(ordered)]


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


def _train(engine: Engine, plan: SeedRun, labels, spec: ContainerSpec, peers: list) -> TrainingRun:
    """``peers``: the other ranks' groups (``Peers``, ``RemoteNodes``), started with rank 0."""
    lines: queue.Queue = queue.Queue()
    expected = earlier_run(paths.results_dir(), plan.entry.name, plan.smoke)  # the estimate of the rest
    with TrainingProgress(plan.entry.task, "train", expected=expected, timeout_s=plan.limits.timeout_s) as progress:
        session = _TrainingSession(engine, plan, labels, progress)
        for group in peers:
            group.on_failure = session.peer_failed
        session.peers = peers

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
            exited.append(session.clock())
            problems.extend(group.stop(60 if ended else 0) for group in session.peers)

        try:
            # The evaluator's container starts first; it gets ready beside the entry's start-up
            # at the lowest CPU weight and is frozen: the evaluations after the container
            # exits pay none of its start-up.
            session.evaluator.prestart()
            try:
                outcome = run_container(
                    engine, spec, lambda line, t: lines.put((line, t)),
                    plan.log("train.log"), on_started=session.started,
                    before_remove=stop_peers,
                )
                exit_t = exited[0] if exited else session.clock()
            finally:
                stop_peers(False)  # a no-op unless rank 0 could not even be created or started
                peer_problem = next((p for p in problems if p), None)
                lines.put(None)
                listener.join()
            if peer_problem and not outcome.interrupted:
                outcome = ContainerOutcome(None, outcome.timed_out, False, outcome.wall_seconds, peer_problem)
            if not session.seen_output:
                session.ours(0.0, LAUNCH, stamp="container-start", first_line=None)
            session.ours(exit_t, CONTAINER_EXIT, exit_code=outcome.exit_code)
            progress.exited(exit_t)  # the checkpoints are scored now
            session.evaluator.stay_awake()  # every rank is gone: no clock runs any more
            session.evaluate_pending(interrupted=outcome.interrupted)
            final = session.evaluate_final() if outcome.ok else None
            sensitivity = session.evaluate_sensitivity() if outcome.ok or session.crossing_checkpoint else []
            session.note_evaluator_start()
        finally:
            session.cpu_sampler.close()
            session.evaluator.close()
            if session.gpu_freeze is not None:
                session.gpu_freeze.close()
            if session.gpu_work is not None:
                session.gpu_work.close()
    shutil.rmtree(plan.requests_dir, ignore_errors=True)
    if session.after_crossing:
        session.notes.append(f"{session.after_crossing} evaluation request(s) after the crossing were not "
                             "evaluated: the clock had stopped (--full-curve evaluates every checkpoint)")
    events = _in_arrival_order(session.events)
    write_events(plan.result_dir / "events.jsonl", events)
    return TrainingRun(events, outcome, final, sensitivity=sensitivity, started_unix_ms=session.started_unix_ms,
                       notes=session.notes, started_monotonic=session.started_monotonic)
