"""``runner reproduce``: every stage of a reproduction, in the order it runs.

check the host -> stage data -> build the image -> train (the harness keeps the clock)
-> score and compute TTA -> infer (batch 1, gated) -> fingerprint -> result -> bundle.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import docker
from rich.console import Console

from runner import paths
from runner.build import BuiltImage, build_entry
from runner.build import parse_lock, resolve_wheels
from runner.build.context import entry_files
from runner.build.image_audit import AUDIT_FILE, ImageAudit, audit_image
from runner.bundle import PROFILE_FILE, sign_folder
from runner.engine import get_client
from runner.engine.kinds import refusal as engine_refusal
from runner.harness.backends import CPU_BACKENDS
from runner.engine.gpus import gpu_containers_possible
from runner.errors import UserError
from runner.fingerprint import capture_host, capture_image
from runner.infer import check_backends_available, run_inference
from runner.manifest import Entry, load_entry
from runner.mlperf.run_log import write_mlperf_log
from runner.options import ReproduceOptions
from runner.plan import make_plan
from runner.data import StagedData
from runner.data.for_run import stage_data, stage_public_inputs
from runner.data.public_inputs import StagedInput
from runner.profiles import Profile, cost_usd, load_profile, match, price_fields, require_match
from runner.results import new_run_id, summarize_runs, write_json
from runner.results import assemble
from runner.results.inference import BackendRun, as_dicts
from runner.results.record import Result
from runner.run import ownership
from runner.engine.containers import remove_orphans
from runner.run.cores import hold_cores
from runner.run.guards import RunGuards
from runner.run.allocation import check_nodes, cluster_network, require_network_setting
from runner.run.training import CHECKPOINTS_DIR, LAUNCH_GAP_LIMIT_S, NodesPlan, TrainingInputs, TrainingRun, run_training
from runner.score.probe import make_probe_inputs, probe_record
from runner.score.summary import summarize_training
from runner.timings import Timings, training_parts

# The crossing checkpoint is kept in the bundle up to this size (its sha256 always).
KEEP_CHECKPOINT_BYTES = 256 * 2**20


@dataclass
class RunContext:
    """What every run of one reproduction shares."""

    entry: Entry
    profile: Profile
    client: docker.DockerClient
    built: BuiltImage
    staged: StagedData
    labels: object  # int64 array, or SQuAD's {id: answers}
    fingerprint: dict
    backends: list[str]
    gpus: int
    nonconforming: list[str] = field(default_factory=list)
    hardware: dict = field(default_factory=dict)  # result.json's hardware record
    audit: ImageAudit | None = None
    network: str | None = None  # the cluster network of a run spanning nodes
    # The phases every run of this reproduction shares (recorded in the first run's timings).
    timings: Timings = field(default_factory=Timings)
    public: list[StagedInput] = field(default_factory=list)  # the manifest's public inputs, mounted read-only


def harness_digest() -> str:
    """sha256 over the container-side harness files, so a result names the harness it used."""
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


def _check_hardware(entry: Entry, profile, fingerprint: dict, opts: ReproduceOptions):
    """The result's ``hardware`` record and the reasons the run is non-conforming."""
    record = require_match(
        profile, fingerprint, opts.allow_hardware_mismatch or opts.smoke,
        of=entry.name, also="or --smoke for a quick CPU check", nodes=entry.nodes,
    )
    if opts.smoke:  # never conforming, whatever the host: its hardware record lists any mismatch
        return record, ["smoke run: one short epoch on synthetic data"]
    reasons = []
    if record["mismatches"]:
        reasons.append("hardware mismatch: " + "; ".join(record["mismatches"]))
    return record, reasons


def _choose_backends(entry: Entry, opts: ReproduceOptions, gpus: int) -> list[str]:
    backends = opts.backends or list(entry.inference.backends)
    if opts.smoke and gpus == 0:
        # A smoke run checks the pipeline on CPU; GPU-only backends cannot run there.
        backends = [b for b in backends if b in CPU_BACKENDS] or ["torch"]
    return backends


def prepare(entry_path: str, opts: ReproduceOptions, console: Console, scratch: Path) -> RunContext:
    clock = Timings()
    with clock.phase("preflight"):
        entry = load_entry(entry_path)
        if opts.smoke:
            entry = entry.for_smoke()
        check_nodes(entry.nodes)
        profile = load_profile(entry.hardware_profile)
        client = get_client()
        if why := engine_refusal(client):
            raise UserError(why, "run the engine rootful (`sudo runner setup --engine podman`), or on a cgroup v2 host")
        network = cluster_network(client, require_network_setting(entry.nodes)) if entry.nodes > 1 else None
        if removed := remove_orphans(client):
            console.print(f"removed {removed} container(s) left by an earlier, killed run")
        if swept := ownership.sweep_scratch():
            console.print(f"removed {len(swept)} scratch folder(s) left by an earlier, killed run: "
                          + ", ".join(map(str, swept)))
        for killed in ownership.recover_killed_runs():
            console.print(f"marked {killed} incomplete: {ownership.KILLED_REASON}")
    with clock.phase("fingerprint"):
        fingerprint = capture_host(client)
    hardware, reasons = _check_hardware(entry, profile, fingerprint, opts)
    host_gpus = len((fingerprint.get("gpu") or {}).get("gpus") or [])
    gpus = min(profile.gpu_count, host_gpus)
    if gpus and not gpu_containers_possible(fingerprint):
        podman = (fingerprint.get("docker") or {}).get("engine") == "podman"
        raise UserError(
            f"this host has {host_gpus} NVIDIA GPU(s) but the {'Podman' if podman else 'Docker'} engine cannot "
            "give them to containers",
            "install the NVIDIA Container Toolkit (nvidia-container-toolkit) and run "
            + ("`nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml` (Podman takes GPUs as CDI devices)"
               if podman else "`nvidia-ctk runtime configure --runtime=docker` and restart dockerd"),
        )
    backends = _choose_backends(entry, opts, gpus)
    check_backends_available(backends, fingerprint)
    with clock.phase("data check"):
        staged = stage_data(entry, opts.smoke, console, scratch)
        public = stage_public_inputs(entry, opts.smoke, staged, scratch)
    if not staged.conforming and not opts.smoke:
        reasons.append(f"data set {staged.task} was staged from unofficial files")
    if staged.train_tree is not None and not staged.train_tree.conforming and not opts.smoke:
        reasons.append(f"the {staged.task} training tree was imported from unofficial files")
    console.print(f"[bold]build[/] {entry.name} (base {entry.base_image})")
    with clock.phase("image check or build"):
        built = build_entry(entry, client)
    console.print(
        f"  image {built.image_id[:19]}  {'cache hit' if built.cached else 'built'} "
        f"in {built.seconds:.1f} s"
    )
    with clock.phase("image facts"):
        fingerprint = {**fingerprint, "image": capture_image(client, built.image_id)}
    with clock.phase("image audit"), console.status("auditing the image for weights and data it should not carry"):
        wheels = list(resolve_wheels(parse_lock(entry.lock_path)).values())
        audit = audit_image(client, built.image_id, built.base.id, wheels, entry.path,
                            entry_files(entry.path), Path(staged.eval_dir) / "images.npy",
                            Path(staged.labels) / "eval_labels.npy")
    if problem := audit.problem():
        reasons.append(problem)
    return RunContext(
        entry, profile, client, built, staged, staged.load_eval_labels(), fingerprint,
        backends, gpus, reasons, hardware, audit, network, clock, public,
    )


def train_env(task, profile, seed: int, smoke: bool, hyperparameters: dict[str, str]) -> dict[str, str]:
    """The training container's environment (the run contract's variables)."""
    limits = profile.container_limits
    # CPU profiles grant a number of cores; GPU profiles get the whole host's CPUs.
    threads = int(limits.cpus) if limits and limits.cpus else os.cpu_count() or 1
    return {
        "RUNNER_TASK": task.id,
        "RUNNER_SEED": str(seed),
        "RUNNER_DATA": "/data",
        "RUNNER_OUTPUT": "/output",
        "RUNNER_THREADS": str(threads),
        "RUNNER_THRESHOLD": repr(task.threshold),
        "RUNNER_SMOKE": "1" if smoke else "0",
        "HOME": "/scratch",
        **{f"RUNNER_HP_{name.upper()}": value for name, value in hyperparameters.items()},
    }


def _started_result(ctx: RunContext, run_id: str, seed: int, opts: ReproduceOptions) -> Result:
    return assemble.started(
        run_id=run_id, entry=ctx.entry, seed=seed, smoke=opts.smoke, harness_digest=harness_digest(),
        built=ctx.built, staged=ctx.staged, price=price_fields(ctx.profile), hardware=ctx.hardware,
        nonconforming=ctx.nonconforming, audit=ctx.audit.summary() if ctx.audit else None,
        hyperparameters=opts.hyperparameters, public_inputs=[p.record() for p in ctx.public] or None,
    )


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

def open_result_folder(ctx: RunContext, seed: int) -> Path:
    """A new run folder with what is known before training: the host, the image, the entry."""
    result_dir = paths.results_dir() / ctx.entry.name / new_run_id(seed)
    (result_dir / "logs").mkdir(parents=True)
    write_json(result_dir / "fingerprint.json", ctx.fingerprint)
    write_json(result_dir / "sbom.json", ctx.built.sbom)
    shutil.copyfile(ctx.profile.path, result_dir / PROFILE_FILE)
    copy_entry_files(ctx.entry, result_dir / "entry")
    if ctx.audit is not None:
        write_json(result_dir / AUDIT_FILE, ctx.audit.to_dict())
    return result_dir


def _check_nodes(ctx: RunContext, result: Result, opts: ReproduceOptions):
    """Judge the other nodes of a run spanning nodes once their agents are ready: each node's
    hardware against the profile (named by node), and the image each will run."""
    def check(ready: dict[int, dict]) -> str | None:
        mismatches = [str(m) for node in sorted(ready)
                      for m in match(ctx.profile, ready[node].get("fingerprint") or {}, ctx.entry.nodes, node)]
        if mismatches and not (opts.allow_hardware_mismatch or opts.smoke):
            return f"hardware profile '{ctx.profile.id}' is not met: " + "; ".join(mismatches)
        if mismatches:
            result.hardware = {**result.hardware, "matched": False, "allowed_mismatch": True,
                               "mismatches": [*result.hardware["mismatches"], *mismatches]}
            if not opts.smoke:  # a smoke run is non-conforming as such
                result.not_conforming("hardware mismatch: " + "; ".join(mismatches))
        for node, message in sorted(ready.items()):
            if message.get("image") != ctx.built.image_id:
                result.not_conforming(f"node {node} ran image {message.get('image')}, built there, "
                                      f"not the audited {ctx.built.image_id}")
        return None
    return check


def _nodes_plan(ctx: RunContext, result: Result, opts: ReproduceOptions) -> NodesPlan | None:
    if ctx.entry.nodes <= 1:
        return None
    from runner.slurm.submit import runner_command

    return NodesPlan(count=ctx.entry.nodes, network=ctx.network, entry=str(ctx.entry.path.resolve()),
                     smoke=opts.smoke, data_digest=ctx.staged.digest, runner=runner_command(),
                     check=_check_nodes(ctx, result, opts))


def train(ctx: RunContext, result: Result, result_dir: Path, opts: ReproduceOptions,
          console: Console, scratch: Path) -> TrainingRun:
    """The training container, its clock and the runner's evaluations of its checkpoints."""
    entry, limits = ctx.entry, ctx.profile.container_limits
    probe_dir = make_probe_inputs(ctx.staged.eval_dir, scratch / f"probe-{result.run_id}", result.seed)
    result.probe = probe_record(entry.task, result.seed) if probe_dir else None
    env = train_env(entry.task, ctx.profile, result.seed, opts.smoke, opts.hyperparameters)
    console.print(f"[bold]train[/] {entry.name} seed {result.seed} -> {result_dir}")
    return run_training(
        ctx.client, entry.task, ctx.labels,
        TrainingInputs(
            image=ctx.built.image_id, command=entry.train.command, train_dir=ctx.staged.train_dir,
            eval_dir=ctx.staged.eval_dir, probe_dir=probe_dir, result_dir=result_dir,
            scratch_dir=scratch, env=env,
            cpus=limits.cpus if limits else None, memory=limits.memory if limits else None,
            gpus=ctx.gpus, timeout_s=(opts.timeout_minutes or entry.train.timeout_minutes) * 60,
            builder=entry.inference.builder, framework=entry.framework["name"], final_weights=entry.final_weights,
            topk=entry.task.topk, threads=int(env["RUNNER_THREADS"]), world_size=entry.world_size,
            full_curve=opts.full_curve,
            nodes=_nodes_plan(ctx, result, opts),
            builder_seconds=entry.inference.builder_seconds,
            sensitivity_seed=result.seed ^ 0x5EED,
            kind=entry.task.inputs,
            public=tuple((p.folder, f"/data/public/{p.name}") for p in ctx.public),
        ),
    )


def score(ctx: RunContext, result: Result, run: TrainingRun, result_dir: Path) -> None:
    """The training section, TTA and its cost, from the runner's events and predictions."""
    result.ended("complete" if run.outcome.ok else "incomplete", run.outcome.reason())
    summary = summarize_training(ctx.entry.task, run.events, run.outcome.wall_seconds, run.notes,
                                 run.final, result_dir, ctx.labels, LAUNCH_GAP_LIMIT_S,
                                 run.sensitivity, ctx.entry.inference.builder_seconds)
    result.training = summary.training
    result.training.wall_clock_start_unix_ms = run.started_unix_ms
    result.training.train_samples = ctx.staged.counts.get("train")
    if summary.invalid and result.status == "complete":
        result.ended("invalid", summary.invalid)
    for reason in summary.nonconforming:
        result.not_conforming(reason)
    if result.training.reached:
        result.cost.training_usd = cost_usd(result.training.tta_seconds, ctx.profile, ctx.entry.nodes)
    _keep_crossing_checkpoint(result_dir, result.training.crossing)


def record_training_energy(result: Result, run: TrainingRun, verdict, result_dir: Path) -> None:
    """result.json's ``energy`` (the training window and joules-to-accuracy) and, on a run with
    GPUs, ``gpu_sharing``; the sampled series is kept as ``energy.tsv`` (training clock)."""
    from runner.energy import training_energy
    from runner.score.tta import EventStreamError, timeline

    if verdict.gpu_sharing is not None:
        result.gpu_sharing = verdict.gpu_sharing.to_dict()
    series = verdict.energy
    if series is None:
        return
    origin = run.started_monotonic
    try:
        line = timeline(run.events)
    except EventStreamError:
        line = None
    if line is None or origin is None:
        result.energy = {"training": None, "not_measured": "the run has no valid clock to place its energy on",
                         "methods": series.methods, "missing": series.missing}
        return
    crossing = result.training.crossing if result.training and result.training.reached else None
    result.energy = {"training": training_energy(series, line, crossing, origin),
                     "methods": series.methods, "missing": series.missing}
    if series.times:
        (result_dir / "energy.tsv").write_text(series.tsv(origin))


def infer(ctx: RunContext, result: Result, result_dir: Path, opts: ReproduceOptions, console: Console) -> None:
    """Every evaluation item at batch 1 on each backend, gated on the threshold."""
    weights = result_dir / "output" / ctx.entry.final_weights
    if not (opts.infer and result.status == "complete" and weights.is_file()):
        return
    console.print(f"[bold]infer[/] {', '.join(ctx.backends)} (batch 1, every eval item)")
    result.inference = run_inference(
        ctx.client, ctx.entry, ctx.built.image_id, result_dir, ctx.staged, ctx.backends,
        ctx.profile, labels=ctx.labels, host=ctx.fingerprint, with_loadgen=opts.loadgen,
    )
    check_timed_model(result, result_dir)


def check_timed_model(result: Result, result_dir: Path) -> None:
    """Each backend timed the model the evaluator scored as the final model (class 5), and
    no evaluation up to the crossing took longer to predict than that model's own batch-1
    pass over the same items (class 2: work inside the frozen window)."""
    from runner.score.evaluations import ScoredEvaluation, backend_predictions_name, load_predictions
    from runner.score.model_origin import predict_time_problems, timed_disagreement, timed_model_problem
    from runner.tasks import get_task

    t = result.training
    if t is not None and t.model_origin is not None and t.evaluations:
        scored = [ScoredEvaluation(**e) for e in t.evaluations]
        record, problems = predict_time_problems(scored, t.crossing, as_dicts(result.inference), result.task.eval_size)
        t.model_origin["predict_seconds"] = record
        for problem in problems:
            result.not_conforming(problem)
    final = result.training.final_model if result.training else None
    if not final or not isinstance(final.get("predictions"), str):
        return
    name = backend_predictions_name(get_task(result.task.id))
    try:
        evaluated = load_predictions(result_dir / final["predictions"])
    except (OSError, ValueError):
        return
    for backend, record in sorted(result.inference.items()):
        try:
            timed = load_predictions(result_dir / "inference" / backend / name)
        except (OSError, ValueError):
            continue
        record.final_model_disagreement = disagreement = timed_disagreement(timed, evaluated)
        if problem := timed_model_problem(backend, disagreement):
            result.not_conforming(problem)


def run_once(ctx: RunContext, seed: int, opts: ReproduceOptions, console: Console, scratch: Path,
             clock: Timings | None = None) -> Path:
    """One run, from its result folder to its final result.json. ``clock`` holds what was
    timed before it (the shared phases, for the first run); this run's phases are added."""
    clock = clock or Timings()
    with clock.phase("result folder"):
        result_dir = open_result_folder(ctx, seed)
        result = _started_result(ctx, result_dir.name, seed, opts)
        result.write(result_dir)  # a crash from here on still leaves a record
        ownership.mark_running(result.run_id, result_dir)  # a SIGKILL from here on is recovered at next start
        limits = ctx.profile.container_limits
        guards = RunGuards(ctx.client, result.run_id, limits.cpus if limits else None, result_dir / "output",
                           gpus=ctx.gpus).start()
    started = time.monotonic()
    run = train(ctx, result, result_dir, opts, console, scratch)
    verdict = guards.stop()
    seconds = time.monotonic() - started
    clock.add("training", seconds, training_parts(run.events, seconds))
    with clock.phase("scoring"):
        score(ctx, result, run, result_dir)
        record_training_energy(result, run, verdict, result_dir)
        verdict.apply(result)  # contention, output quota, dropped events
        result.timings = clock.to_dict()
        result.write(result_dir)
    if run.outcome.interrupted:
        console.print(f"[red]interrupted[/]: the incomplete result is kept in {result_dir}")
        raise KeyboardInterrupt
    started = time.monotonic()
    infer(ctx, result, result_dir, opts, console)
    if result.inference:
        clock.add("inference", time.monotonic() - started, inference_parts(result.inference))
    with clock.phase("mlperf log"):
        written, note = write_mlperf_log(result_dir)
    if written:
        console.print(f"[bold]mlperf[/] log {written}" + (f"; [yellow]{note}[/]" if note else ""))
    else:
        console.print(f"[yellow]no MLPerf log[/]: {note}")
    started = time.monotonic()
    result.timings = clock.to_dict()
    result.write(result_dir)
    clock.add("writing", time.monotonic() - started)
    result.timings = clock.to_dict()
    result.write(result_dir)
    return result_dir


def inference_parts(inference: dict[str, BackendRun]) -> dict:
    """Per backend: its timed per-item pass and, apart, its LoadGen scenarios (the rest of the
    phase is the container's start, the models' builds and exports, and warm-up)."""
    parts = {}
    for name, record in sorted(inference.items()):
        if isinstance(record.window_seconds, (int, float)):
            parts[f"{name}_per_item_seconds"] = round(record.window_seconds, 4)
        loadgen = record.loadgen or {}
        windows = [s.get("window_seconds") for s in (loadgen.get("single_stream"), loadgen.get("offline"))
                   if isinstance(s, dict) and isinstance(s.get("window_seconds"), (int, float))]
        if windows:
            parts[f"{name}_loadgen_seconds"] = round(sum(windows), 4)
    return parts


def reproduce(entry_path: str, opts: ReproduceOptions, console: Console) -> list[Path]:
    """Run an entry ``runs`` times; return each run's result folder."""
    with ownership.scratch_folder() as tmp, sigterm_as_interrupt():
        plan = make_plan(entry_path, opts)  # the seeds: the runner's (or the auditor's --seed), never the entry's
        ctx = prepare(entry_path, opts, console, Path(tmp))
        folders, signing = [], {}
        limits = ctx.profile.container_limits
        for i, seed in enumerate(plan.seeds):
            clock = ctx.timings if i == 0 else Timings()  # the shared phases count once
            waited = time.monotonic()
            with hold_cores(limits.cpus if limits else None, console.print, ctx.entry.name):
                if (held := time.monotonic() - waited) > 0.05:
                    clock.add("waiting for cores", held)
                folder = run_once(ctx, seed, opts, console, Path(tmp), clock)
                ownership.mark_finished(folder.name)
                if opts.sign:
                    started = time.monotonic()
                    sign_folder(folder, console)
                    signing[folder] = time.monotonic() - started
            folders.append(folder)
        for folder in mark_alike_runs(folders, ctx.labels, console):
            if opts.sign:  # its result changed: its bundle is signed again
                sign_folder(folder, console)
    if opts.verbose:
        from runner.timings import render_timings

        for folder in folders:
            timings = Result.read(folder).timings or {}
            console.print(render_timings(timings, f"where the time of {folder.name} went"))
            if folder in signing:
                console.print(f"  then signing: {signing[folder]:.2f} s (after result.json was final)")
    return folders


def mark_alike_runs(folders: list[Path], labels, console: Console) -> list[Path]:
    """Runs whose crossing models are the same network across seeds are non-conforming
    (``runner.score.across_runs``); return the folders whose result changed."""
    from runner.score.across_runs import alike_runs

    changed = []
    for folder, reasons in alike_runs(folders, labels).items():
        result = Result.read(folder)
        for reason in reasons:
            if reason not in result.nonconforming_reasons:
                result.not_conforming(reason)
                console.print(f"[yellow]non-conforming[/] {result.run_id}: {reason}")
        result.write(folder)
        changed.append(folder)
    return changed


def summarize(folders: list[Path]):
    return summarize_runs([Result.read(folder).tta_seconds for folder in folders])
