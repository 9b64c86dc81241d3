"""``runner reproduce``: every stage of a reproduction, in the order it runs.

check the host -> stage data -> build the image -> train (the harness keeps the clock)
-> score and compute TTA -> infer (batch 1, gated) -> fingerprint -> result -> bundle.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import TypeVar

from rich.markup import escape

from runner import __version__, data, paths
from runner.entry_build import BuiltImage, build_entry
from runner.background import Background
from runner.entry_build.entry_image import BuildInputs
from runner.entry_build import parse_lock, resolve_wheels
from runner.entry_build.context import entry_files
from runner.entry_build.cyclonedx import FILE as CYCLONEDX_FILE, cyclonedx_document
from runner.entry_build.image_inspection import INSPECTION_FILE, ImageInspection, inspect_image, read_ahead
from runner.entry_build.information import budget_for
from runner.bundle import PROFILE_FILE, finish_folder, record_measured, settle_outputs
from runner.bundle.filelist import MANIFEST
from runner.bundle.measured import measured_record, require_unchanged
from runner.keys import load_signer
from runner.keys.ledger import earlier_runs
from runner.engine import Engine, get_engine
from runner.harness.backends import CPU_BACKENDS
from runner.engine.gpus import gpu_containers_possible
from runner.errors import UserError
from runner.fingerprint import capture_host, capture_image
from runner.inference import TrainedModel, check_backends_available, loadgen, run_inference
from runner.manifest import Entry
from runner.mlperf.run_log import write_mlperf_log
from runner.options import ReproduceOptions
from runner.plan import PLAN_FILE, SLURM, Prepared, ResolvedPlan, RunData, RunPlan, SeedRun, make_plan
from runner.data import StagedData
from runner.digests import sha256_file
from runner.data.for_run import stage_data, stage_public_inputs
from runner.data.public_inputs import StagedInput
from runner.profiles import cost_usd, require_match
from runner.results import new_run_id, summarize_runs, write_json
from runner.results import assemble
from runner.results.inference import BackendRun
from runner.results.layout import entry_dir, short_id
from runner.score.timed_model import check_timed_model
from runner.results.record import Result
from runner.run import ownership
from runner.engine.containers import remove_orphans
from runner.run.calm import FRESH_S, wait_for_calm
from runner.run.calm import begin as begin_measure
from runner.run.cores import cpuset_for, hold_cores
from runner.run.guards import GuardVerdict, RunGuards
from runner.run.allocation import check_nodes, cluster_network, require_network_setting
from runner.plan import CHECKPOINTS_DIR
from runner.initial_weights import INIT_DIR, INIT_RECORD, Tensor, undrawn_problem
from runner.run.init_weights import ensure_init, model_tensors, roles_for
from runner.run.training import TrainingRun, run_training
from runner.score.model_origin import CLASS4
from runner.score.probe import make_probe_inputs, probe_record
from runner.score.summary import TrainingSummary, summarize_training
from runner.timings import Timings, render_timings, training_parts
from runner.report import reporter
from runner.energy import training_energy
from runner.score.tta import EventStreamError, timeline
from runner.slurm import reproduce_on_slurm
from runner.slurm.submit import runner_command

# The crossing checkpoint is kept in the bundle up to this size (its sha256 always).
KEEP_CHECKPOINT_BYTES = 256 * 2**20


T = TypeVar("T")


@dataclass
class EndedRun:
    """A run that ended, not yet finished: its folder, its record (in memory until it is
    finished: written once, then signed once, by ``finish_runs``) and the clock of its phases
    (None for a run read back from its folder: a gathered Slurm run)."""

    folder: Path
    result: Result
    clock: Timings | None = None


@cache
def harness_digest() -> str:
    """sha256 over the container-side harness files, so a result names the harness it used
    (hashed once per process)."""
    h = hashlib.sha256()
    for f in sorted(paths.harness_dir().rglob("*.py")):
        h.update(f.relative_to(paths.harness_dir()).as_posix().encode() + b"\0")
        h.update(f.read_bytes())
    return h.hexdigest()


@contextmanager
def sigterm_as_interrupt():
    """A SIGTERM (a CI cancel, ``kill``) stops a run like Ctrl-C: container removed, result kept."""
    def handler(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _check_hardware(plan: RunPlan, fingerprint: dict) -> tuple[dict, list[str]]:
    """The result's ``hardware`` record and the reasons the run is non-conforming."""
    opts, entry = plan.options, plan.entry
    record = require_match(
        plan.profile, fingerprint, opts.allow_hardware_mismatch or opts.smoke,
        of=entry.name, also="or --smoke for a quick CPU check", nodes=entry.nodes,
    )
    if opts.smoke:  # never conforming, whatever the host: its hardware record lists any mismatch
        return record, ["smoke run: one short epoch on synthetic data"]
    reasons = []
    if record["mismatches"]:
        reasons.append("hardware mismatch: " + "; ".join(record["mismatches"]))
    return record, reasons


def _choose_backends(plan: RunPlan, gpus: int) -> list[str]:
    backends = list(plan.backends)
    if plan.smoke and gpus == 0:
        # A smoke run checks the pipeline on CPU; GPU-only backends cannot run there.
        backends = [b for b in backends if b in CPU_BACKENDS] or ["torch"]
    return backends


# -- the shared stages, in the order they run ------------------------------------------------

def preflight(plan: RunPlan, on_removed: Callable[[], object] = lambda: None) -> tuple[Engine, str | None]:
    """The engine (refused here, with its fix, when it cannot run entries) and, for a run
    spanning nodes, its network; what killed runs left behind is cleaned up first
    (``on_removed``: called when containers were removed)."""
    check_nodes(plan.entry.nodes)
    engine = get_engine()
    if why := engine.refusal():
        raise UserError(why, engine.refusal_fix())
    network = cluster_network(engine, require_network_setting(plan.entry.nodes)) if plan.entry.nodes > 1 else None
    if removed := remove_orphans(engine):
        reporter().print(f"removed {removed} container(s) left by an earlier, killed run")
        on_removed()
    if swept := ownership.sweep_scratch():
        reporter().print(f"removed {len(swept)} scratch folder(s) left by an earlier, killed run: "
                         + ", ".join(map(str, swept)))
    for killed in ownership.recover_killed_runs():
        reporter().print(f"marked {killed} incomplete: {ownership.KILLED_REASON}")
    return engine, network


def host_gpus(plan: RunPlan, engine: Engine, fingerprint: dict) -> tuple[int, list[str]]:
    """The GPUs the runs get (the profile's, as many as the host has; refused when the engine
    cannot give them to containers) and the backends they can time."""
    found = len((fingerprint.get("gpu") or {}).get("gpus") or [])
    gpus = min(plan.profile.gpu_count, found)
    if gpus and not gpu_containers_possible(fingerprint):
        _, fix = engine.gpu_support(fingerprint.get("docker") or {})
        raise UserError(f"this host has {found} NVIDIA GPU(s) but the {engine.name} engine cannot "
                        "give them to containers", fix)
    backends = _choose_backends(plan, gpus)
    check_backends_available(backends, fingerprint)
    return gpus, backends


def stage(plan: RunPlan, scratch: Path) -> tuple[StagedData, tuple[StagedInput, ...], list[str]]:
    """The task's data and the manifest's public inputs, staged, and the reasons they make the
    runs non-conforming (unofficial files)."""
    entry = plan.entry
    staged = stage_data(entry, plan.smoke, scratch)
    public = tuple(stage_public_inputs(entry, plan.smoke, staged, scratch))
    reasons = []
    if not staged.conforming and not plan.smoke:
        reasons.append(f"data set {staged.task} was staged from unofficial files")
    if staged.train_tree is not None and not staged.train_tree.conforming and not plan.smoke:
        reasons.append(f"the {staged.task} training tree was imported from unofficial files")
    return staged, public, reasons


def build(plan: RunPlan, engine: Engine, inputs: BuildInputs | None) -> tuple[BuiltImage, dict | None]:
    """The entry's image (a cache hit when its inputs did not change) and, where the engine
    cannot isolate the runs (the host engine), the record of why (result.json's ``isolation``).
    ``inputs``: its base image and wheels, when their fetching began earlier."""
    entry = plan.entry
    on = "on this host's Python environment, no image" if engine.own_root else f"base {entry.base_image}"
    reporter().print(f"[bold]build[/] {entry.name} ({on})")
    built = build_entry(entry, engine, inputs=inputs)
    reporter().print(f"  image {built.image_id[:19]}  {'cache hit' if built.cached else 'built'} "
                     f"in {built.seconds:.1f} s")
    isolation = None
    if why_not := engine.isolation(built.image_id):
        isolation = {"isolated": False, "engine": engine.name, "why_not": why_not}
        reporter().print(f"[yellow]{escape(why_not)}[/]")
    return built, isolation


def _eval_files(staged: StagedData) -> tuple[Path, Path]:
    return Path(staged.eval_dir) / "images.npy", Path(staged.labels) / "eval_labels.npy"


def _read_ahead(engine: Engine, inputs: BuildInputs, staged: StagedData,
                stop: threading.Event) -> list[Path] | None:
    """``image_inspection.read_ahead`` once the base image and the wheels are there; the
    verified wheels, or None when fetching them failed (the build says why, in its turn)."""
    try:
        base, wheels = inputs.base(), list(inputs.wheels().values())
    except UserError:
        return None
    try:
        read_ahead(engine, base.id, wheels, *_eval_files(staged), stop=stop)
    except Exception:  # noqa: BLE001 - the inspection reads what was not read ahead, and reports its own errors
        pass
    return wheels


def inspect(plan: RunPlan, engine: Engine, built: BuiltImage, staged: StagedData,
            ahead: Background[list[Path] | None] | None = None) -> ImageInspection:
    """The image inspected for weights and evaluation data it should not carry. ``ahead``:
    the read-ahead begun before the build (waited for: its answers are this inspection's),
    which hands over the wheels the build verified."""
    entry = plan.entry
    verified = ahead.result() if ahead is not None else None

    def wheels() -> list[Path]:  # only on a cache miss: resolving them hashes every wheel
        if engine.own_root:  # nothing of the lock was installed
            return []
        if verified is not None:
            return verified
        return list(resolve_wheels(parse_lock(entry.lock_path)).values())

    reporter().print("[bold]inspect[/] the image for weights and data it should not carry")
    return inspect_image(engine, built.image_id, built.base.id, wheels, entry.path, entry_files(entry.path),
                         *_eval_files(staged), lock=entry.lock_path, budget=budget_for(entry.task.id))


def prepare(plan: RunPlan, scratch: Path, clock: Timings) -> tuple[ResolvedPlan, Prepared]:
    """The stages every run shares, each timed on ``clock``: the host, the data, the image and
    its inspection, the model's tensors. Returns the plan as they resolved it (GPUs, backends,
    image, data) and what they found."""
    entry = plan.entry
    # A busy host is named before the build, not after the run (runner.run.calm). The measure
    # samples while the runner prepares; a build waits for it before it fetches anything, and
    # a run whose image is built already takes it before its training (``run_once``).
    cpuset = cpuset_for(plan.limits.cpus)
    begin_measure(cpuset)
    with clock.phase("preflight"):
        engine, network = preflight(plan, on_removed=lambda: begin_measure(cpuset))  # a removed run's load is gone

    def calm_before_build() -> None:
        with clock.phase("host load check"):
            wait_for_calm(cpuset, "before the build", plan.options.allow_contended, plan.options.calm_timeout_s,
                          meanwhile=_ahead_of_finishing)

    with clock.phase("fingerprint"):
        fingerprint = capture_host(engine)
    hardware, reasons = _check_hardware(plan, fingerprint)
    gpus, backends = host_gpus(plan, engine, fingerprint)
    # The base image and the wheels are fetched while the data is staged: all three are
    # independent, and on a fresh machine the base image is the longest wait.
    inputs = BuildInputs.start(plan.entry, engine, before=calm_before_build)
    with clock.phase("data check"):
        staged, public, unofficial = stage(plan, scratch)
    reasons += unofficial
    # What the inspection reads besides the image (the base's files, the wheels searched for
    # the evaluation set) is read while the image builds: on a fresh machine, beside pip.
    # A run that fails here ends the read-ahead too (it reads for this run only): in a process
    # that goes on (a test session, a sweep) it would compete with what comes next.
    stop = threading.Event()
    ahead = Background(lambda: _read_ahead(engine, inputs, staged, stop), "inspection read-ahead") if inputs else None
    try:
        with clock.phase("image check or build"):
            built, isolation = build(plan, engine, inputs)
        # The inspection reads the image's export on the host while containers of the image
        # report its software and the model's tensors: neither waits on the other.
        # (One phase holds the three, so a terminal keeps one live line whichever ends first.)
        with reporter().phase("image", "inspection, software and model tensors"):
            inspecting = Background(lambda: _timed(lambda: inspect(plan, engine, built, staged, ahead)), "inspection")
            with clock.phase("image facts"):
                fingerprint = {**fingerprint, "image": capture_image(engine, built.image_id)}
            with clock.phase("model tensors"):
                initial = initial_tensors(engine, entry, built.image_id, plan.limits, scratch)
            waited = time.monotonic()
            inspection, inspected_s = inspecting.result()
    except BaseException:
        stop.set()
        raise
    clock.add("image inspection", inspected_s, {"waited_s": round(time.monotonic() - waited, 4)})
    if problem := inspection.problem():
        reasons.append(problem)
    if problem := undrawn_problem(initial):
        reasons.append(f"{CLASS4}{problem}")
    if engine.own_root and plan.options.loadgen and (why := loadgen.host_problem(fingerprint)):
        reporter().warn_once(f"[yellow]LoadGen left out[/]: {escape(why)} (the per-item latency pass runs)")
        plan = replace(plan, options=replace(plan.options, loadgen=False))
    resolved = plan.resolved(
        gpus=gpus, backends=backends, image=built.image_id, network=network,
        runner=runner_command() if entry.nodes > 1 else (),
        initial=tuple((t.name, t.shape, t.role) for t in initial),
        data=RunData(Path(staged.train_dir), Path(staged.eval_dir), staged.digest,
                     tuple((p.folder, p.mount) for p in public)),
    )
    return resolved, Prepared(engine, built, staged, staged.load_eval_labels(), fingerprint, hardware,
                              tuple(reasons), inspection, public, isolation, harness_digest())


def _ahead_of_finishing() -> None:
    """What the runs' end would import (the cross-seed checks' solver), imported while the
    runner waits for a measure of the host's load."""
    from runner.score.aligned_weights import load_solver  # lazy: start-up (runner --help)

    load_solver()


def _timed(work: Callable[[], T]) -> tuple[T, float]:
    started = time.monotonic()
    return work(), time.monotonic() - started


def initial_tensors(engine: Engine, entry: Entry, image: str, limits, scratch: Path) -> list[Tensor]:
    """The model's float tensors with the roles their initial values are drawn in: names and
    shapes from the entry's builder in the sandbox (kept by image), roles by the manifest."""
    listed = model_tensors(engine, image, entry, limits, scratch / "init-shapes.log")
    return roles_for(listed, entry.framework["name"], entry.initial_weights, bool(entry.public_inputs),
                     entry.task.cross_seed.public_width)


def copy_entry_files(entry: Entry, target: Path) -> None:
    """The entry's files, signed with the result: what a replay rebuilds and a human reviews."""
    for path in entry_files(entry.path):
        dest = target / path.relative_to(entry.path)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)


def _keep_crossing_checkpoint(result_dir: Path, crossing: int | None) -> None:
    """Keep the crossing checkpoint (under the size limit); the other copies are gone once
    evaluated (their sha256 stays in the records)."""
    folder = result_dir / CHECKPOINTS_DIR
    if not folder.is_dir():
        return
    for path in folder.iterdir():
        keep = path.name.split(".", 1)[0] == str(crossing) and path.stat().st_size <= KEEP_CHECKPOINT_BYTES
        if not keep:
            path.unlink()


# -- the stages of one run, in the order they run ---------------------------------------------

def open_result_folder(plan: ResolvedPlan, prepared: Prepared, seed: int) -> Path:
    """A new run folder with what is known before training: the host, the image, the entry."""
    result_dir = entry_dir(paths.results_dir(), plan.entry.name, plan.smoke) / new_run_id(seed)
    (result_dir / "logs").mkdir(parents=True)
    write_json(result_dir / "fingerprint.json", prepared.fingerprint)
    built = prepared.built
    write_json(result_dir / "sbom.json", built.sbom)
    # The same packages in CycloneDX, each Python one with its hashes from the lock.
    write_json(result_dir / CYCLONEDX_FILE, cyclonedx_document(built.sbom, parse_lock(plan.entry.lock_path),
                                                               built.image_id, built.tag, __version__))
    if plan.profile.path is None:  # profiles are loaded from hardware_profiles/ (or RUNNER_PROFILES)
        raise UserError(f"profile {plan.profile.id} was not read from a file", "pass a profile from hardware_profiles/")
    shutil.copyfile(plan.profile.path, result_dir / PROFILE_FILE)
    copy_entry_files(plan.entry, result_dir / "entry")
    write_json(result_dir / INSPECTION_FILE, prepared.inspection.to_dict())
    return result_dir


def start(plan: ResolvedPlan, prepared: Prepared, seed: int, scratch: Path) -> tuple[SeedRun, Result]:
    """The run's folder, its plan (``plan.json``), its probe inputs and initial weights, and its
    record as far as it is known before training (in memory: result.json is written once, when
    the run is finished; the record is journalled outside the folder, so a killed runner's run
    is recovered at the next start)."""
    result_dir = open_result_folder(plan, prepared, seed)
    probe_dir = make_probe_inputs(prepared.staged.eval_dir, scratch / f"probe-{result_dir.name}", seed)
    run = plan.for_run(seed, result_dir, scratch, probe_dir)
    run.write(result_dir)
    result = assemble.started(run, prepared, probe_record(plan.entry.task, seed) if probe_dir else None)
    assemble.planned(result, PLAN_FILE, sha256_file(result_dir / PLAN_FILE))
    if (init := ensure_init(run)) is not None:
        assemble.initialized(result, json.loads((init / INIT_RECORD).read_text()),
                             f"{INIT_DIR}/{INIT_RECORD}", sha256_file(init / INIT_RECORD))
    ownership.mark_running(result, result_dir)  # a SIGKILL from here on is recovered at next start
    return run, result


def train(run: SeedRun, prepared: Prepared) -> TrainingRun:
    """The training container, its clock and the runner's evaluations of its checkpoints."""
    reporter().print(f"[bold]train[/] {run.entry.name} seed {run.seed} -> {run.result_dir}")
    return run_training(prepared.engine, run, prepared.labels)


def score(run: SeedRun, prepared: Prepared, training: TrainingRun) -> TrainingSummary:
    """The training section, TTA and its verdicts, from the runner's events and predictions."""
    summary = summarize_training(run, training, prepared.labels, prepared.staged.counts.get("train"))
    _keep_crossing_checkpoint(run.result_dir, summary.training.crossing)
    return summary


def training_energy_section(run: TrainingRun, verdict: GuardVerdict, crossing: int | None,
                            result_dir: Path) -> dict | None:
    """result.json's ``energy``: the training window and joules-to-accuracy (None when nothing
    was sampled); the sampled series is kept as ``energy.tsv`` (training clock)."""
    series = verdict.energy
    if series is None:
        return None
    origin = run.started_monotonic
    try:
        line = timeline(run.events)
    except EventStreamError:
        line = None
    if line is None or origin is None:
        return {"training": None, "not_measured": "the run has no valid clock to place its energy on",
                "methods": series.methods, "missing": series.missing}
    if series.times:
        (result_dir / "energy.tsv").write_text(series.tsv(origin))
    return {"training": training_energy(series, line, crossing, origin),
            "methods": series.methods, "missing": series.missing}


def train_and_score(run: SeedRun, prepared: Prepared, result: Result, clock: Timings) -> TrainingRun:
    """Training under the run's guards, then its scoring, into ``result``."""
    guards = RunGuards(prepared.engine, result.run_id, run.limits.cpus, run.output_dir, gpus=run.limits.gpus).start()
    started = time.monotonic()
    training = train(run, prepared)
    verdict = guards.stop()
    seconds = time.monotonic() - started
    before_start = training.started_monotonic - started if training.started_monotonic is not None else 0.0
    clock.add("training", seconds, training_parts(training.events, seconds, max(0.0, before_start)))
    with clock.phase("scoring"):
        summary = score(run, prepared, training)
        reached, tta = summary.training.reached, summary.training.tta_seconds
        crossing = summary.training.crossing if reached else None
        assemble.trained(result, run=training, summary=summary, guards=verdict,
                         energy=training_energy_section(training, verdict, crossing, run.result_dir),
                         train_samples=prepared.staged.counts.get("train"),
                         training_usd=cost_usd(tta, run.profile, run.entry.nodes) if reached and tta is not None else None)
        assemble.timed(result, clock.to_dict())
    ownership.journal(result, run.result_dir)
    return training


def infer(run: SeedRun, prepared: Prepared, result: Result) -> None:
    """Every evaluation item at batch 1 on each backend, gated on the threshold, and the
    checks that each timed the model that was scored."""
    weights = run.output_dir / run.entry.final_weights
    if not (run.options.infer and result.status == "complete" and weights.is_file()):
        return
    reporter().print(f"[bold]infer[/] {', '.join(run.backends)} (batch 1, every eval item)")
    # The backends were checked against this host's fingerprint when the plan was resolved.
    model = TrainedModel(run.output_dir, prepared.labels, whole_set=prepared.staged.conforming)
    inference = run_inference(prepared.engine, run, model)
    assemble.inferred(result, inference, check_timed_model(result, inference, run.result_dir))


def mlperf_log(run: SeedRun, result: Result) -> None:
    """The run's MLPerf training log (``logs/``), from its record."""
    written, note = write_mlperf_log(run.result_dir, result=result.to_dict())
    if written:
        # A note on the submission settings matters to an MLPerf submission only: `runner export
        # mlperf` refuses without them and `runner config` names them; a run is not warned.
        reporter().print(f"[bold]mlperf[/] log {written}")
    else:
        reporter().print(f"[yellow]no MLPerf log[/]: {note}")


def run_once(plan: ResolvedPlan, prepared: Prepared, seed: int, scratch: Path, clock: Timings) -> EndedRun:
    """One run, from its result folder to its record, complete in memory. ``clock`` holds what
    was timed before it (the shared phases, for the first run); this run's phases are added.
    A run stopped by a failure or an interrupt has its record written as far as it went."""
    # Again after a build (it took minutes) or an earlier run; without a build, the measure
    # ``prepare`` began is taken here, and the first check of the run.
    with clock.phase("host load check"):
        wait_for_calm(cpuset_for(plan.limits.cpus), f"before training seed {seed}", plan.options.allow_contended,
                      plan.options.calm_timeout_s, fresh_s=FRESH_S, meanwhile=_ahead_of_finishing)
    with clock.phase("result folder"):
        run, result = start(plan, prepared, seed, scratch)
    try:
        training = train_and_score(run, prepared, result, clock)
        if training.outcome.interrupted:
            reporter().print(f"[red]interrupted[/]: the incomplete result is kept in {run.result_dir}")
            raise KeyboardInterrupt
        started = time.monotonic()
        infer(run, prepared, result)
        if result.inference:
            clock.add("inference", time.monotonic() - started, inference_parts(result.inference))
        with clock.phase("mlperf log"):
            mlperf_log(run, result)
        with clock.phase("measured record"):
            # Outputs verify would refuse: left out, named, before the runner records what it measured.
            settle_outputs(run.result_dir, result)
            record_measured(run.result_dir, result=result.to_dict())  # its files, kept outside the folder from now on
        ownership.journal(result, run.result_dir)
    except BaseException as stop:
        assemble.stopped(result, f"the runner stopped: {stop}" if str(stop) else "the runner was interrupted")
        result.write_last(run.result_dir, clock)  # never finished: written as far as it went, unsigned
        ownership.mark_finished(result.run_id)
        raise
    return EndedRun(run.result_dir, result, clock)


def inference_parts(inference: dict[str, BackendRun]) -> dict:
    """Per backend: its timed per-item pass and, apart, its LoadGen scenarios (the rest of the
    phase is the container's start, the models' builds and exports, and warm-up)."""
    parts = {}
    for name, record in sorted(inference.items()):
        if isinstance(record.window_seconds, (int, float)):
            parts[f"{name}_per_item_seconds"] = round(record.window_seconds, 4)
        loadgen = record.loadgen or {}
        windows = [float(s["window_seconds"]) for s in (loadgen.get("single_stream"), loadgen.get("offline"))
                   if isinstance(s, dict) and isinstance(s.get("window_seconds"), (int, float))]
        if windows:
            parts[f"{name}_loadgen_seconds"] = round(sum(windows), 4)
    return parts


def launch(plan: RunPlan, slurm=None, resume: bool = True) -> list[Path]:
    """Every run of the plan, where its placement says: on this host (each run in one
    container, one per rank on this host, or across the nodes of an allocation; see
    ``run_training``), or as the tasks of one Slurm job array (``runner.slurm``: ``slurm``
    its sbatch options, ``resume`` skips seeds already complete). Returns the run folders
    in seed order."""
    if plan.placement == SLURM:
        gathered = reproduce_on_slurm(plan, slurm, resume)
        finish_runs([EndedRun(folder, result) for folder, result in gathered], _labels_here(plan), plan)  # signed here, once
        return [folder for folder, _ in gathered]
    return _reproduce_here(plan)


def _labels_here(plan: RunPlan):
    """The evaluation labels on this (the submit) host, for the mistakes across seeds; None
    for a smoke run or a set not staged here (the weights are compared all the same)."""
    if plan.smoke:
        return None
    try:
        return data.staged(plan.entry.task.id).load_eval_labels()
    except (UserError, OSError, ValueError):
        return None


def reproduce(entry_path: str, opts: ReproduceOptions) -> list[Path]:
    """Run an entry ``runs`` times on this host (studies and benchmarks); return each run's folder."""
    return launch(make_plan(entry_path, opts))


def _reproduce_here(plan: RunPlan) -> list[Path]:
    with ownership.scratch_folder() as tmp, sigterm_as_interrupt():
        shared_clock = Timings()
        resolved, prepared = prepare(plan, Path(tmp), shared_clock)
        ended: list[EndedRun] = []
        try:
            for i, seed in enumerate(resolved.seeds):
                clock = shared_clock if i == 0 else Timings()  # the shared phases count once
                waited = time.monotonic()
                with hold_cores(resolved.limits.cpus, reporter().print, resolved.entry.name):
                    if (held := time.monotonic() - waited) > 0.05:
                        clock.add("waiting for cores", held)
                    ended.append(run_once(resolved, prepared, seed, Path(tmp), clock))
        except BaseException:  # the runs that ended before the failure are finished all the same
            try:
                finish_runs(ended, prepared.labels, resolved)
            except Exception as exc:  # the failure that stopped the runs is the one to raise
                reporter().print(f"[yellow]the runs that ended were not finished[/]: {exc}", highlight=False)
            raise
        signing = finish_runs(ended, prepared.labels, resolved)
    if plan.options.verbose:
        for run in ended:
            reporter().print(render_timings(run.result.timings or {}, f"where the time of {short_id(run.folder.name)} went"))
            if run.folder in signing:
                reporter().print(f"  then signing: {signing[run.folder]:.2f} s (after result.json was final)")
    return [run.folder for run in ended]


FINISHING = "signing the finished run"
ACROSS_SEEDS = ("training.cross_seed", "conforming", "nonconforming_reasons")  # what mark_alike_runs writes


def finish_runs(runs: list[EndedRun], labels, plan: RunPlan) -> dict[Path, float]:
    """The end of the runs that ended: their cross-seed records (``mark_alike_runs``; for one
    run, the record that none is possible), then each run, now finished, held to the runner's
    record of its files as the run ended (``record_measured``), written once and signed once
    (``runner.bundle.finish_folder``; with ``--no-sign`` only written: ``runner bundle sign``
    may sign it later, as it was measured). Nothing writes into a folder after this. Gathered
    Slurm runs (signed here, by the submit host) skip a placeholder and a run signed before
    whose result did not change. Returns the seconds each signing took."""
    if not runs:
        return {}
    gathered = plan.placement == SLURM
    started = time.monotonic()
    changed = set(mark_alike_runs(runs, labels, plan))
    if runs[0].clock is not None:  # once for all the runs, like the shared phases: on the first's clock
        runs[0].clock.add("cross-seed checks", time.monotonic() - started)
    signing = {}
    for run in runs:
        folder = run.folder
        if gathered and (folder not in changed and (folder / MANIFEST).is_file()):
            continue
        if gathered and measured_record(folder) is None:
            if folder in changed:  # a run gathered before this host kept records: its bundle is now stale
                reporter().print(f"[yellow]not signed again[/] {short_id(folder.name)}: this runner has no record "
                                 "of measuring it; `runner reproduce` the seed again", highlight=False)
            continue
        started = time.monotonic()
        require_unchanged(folder, run.result.run_id, FINISHING, fields=ACROSS_SEEDS)
        sign = plan.options.sign or gathered
        finish_folder(folder, run.result, run.clock, sign=sign)
        ownership.mark_finished(run.result.run_id)
        if sign:
            signing[folder] = time.monotonic() - started
    return signing


def mark_alike_runs(runs: list[EndedRun], labels, plan: RunPlan) -> list[Path]:
    """Each run's cross-seed record (``training.cross_seed``, in its record in memory); runs
    whose crossing models are not independent across seeds are non-conforming
    (``runner.score.across_runs``). Returns the folders whose record changed."""
    from runner.score.across_runs import across_runs  # lazy: start-up (runner --help)

    changed = []
    folders = [run.folder for run in runs]
    results = {run.folder: run.result for run in runs}
    found = across_runs(folders, labels, plan.entry.task, plan.entry.framework["name"], plan.options.seed is None,
                        earlier_signed_runs(plan, folders), results)
    for folder, (record, reasons) in found.items():
        result = results[folder]
        for reason in assemble.compared_across_seeds(result, record, reasons):
            reporter().print(f"[yellow]non-conforming[/] {short_id(result.run_id)}: {reason}")
        changed.append(folder)
    if found:
        from runner.score.across_runs import summary_line  # lazy: start-up (runner --help)

        reporter().print(summary_line([record for record, _ in found.values()]))
    return changed


def earlier_signed_runs(plan: RunPlan, folders: list[Path]):
    """The signing key's earlier signed runs of the entry that are still on this host, from its
    ledger (``runner.keys.ledger.earlier_runs``), for the cross-seed checks; none for runs
    that will not be signed."""
    from runner.score.across_runs import Earlier  # lazy: start-up (runner --help)

    if not plan.options.sign and plan.placement != SLURM:
        return Earlier()
    signer = load_signer()
    if signer is None:
        return Earlier()
    found, skipped = earlier_runs(signer.public_key.keyid, plan.entry.name, plan.smoke, {f.name for f in folders})
    return Earlier(tuple(found), tuple(skipped))


def summarize(folders: list[Path]):
    return summarize_runs([Result.read(folder).tta_seconds for folder in folders])
