"""``runner reproduce``: every stage of a reproduction, in the order it runs.

check the host -> stage data -> build the image -> train (the harness keeps the clock)
-> score and compute TTA -> infer (batch 1, gated) -> fingerprint -> result -> bundle.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from rich.markup import escape

from runner import __version__, data, paths
from runner.entry_build import BuiltImage, build_entry
from runner.entry_build import parse_lock, resolve_wheels
from runner.entry_build.context import entry_files
from runner.entry_build.cyclonedx import FILE as CYCLONEDX_FILE, cyclonedx_document
from runner.entry_build.image_inspection import INSPECTION_FILE, ImageInspection, inspect_image
from runner.entry_build.information import budget_for
from runner.bundle import PROFILE_FILE, record_measured, settle_outputs, sign_folder
from runner.bundle.filelist import MANIFEST
from runner.bundle.measured import measured_record, require_measured
from runner.keys import load_signer
from runner.keys.ledger import earlier_runs
from runner.engine import Engine, get_engine
from runner.harness.backends import CPU_BACKENDS
from runner.engine.gpus import gpu_containers_possible
from runner.errors import UserError
from runner.fingerprint import capture_host, capture_image
from runner.inference import TrainedModel, check_backends_available, run_inference
from runner.manifest import Entry
from runner.mlperf.run_log import write_mlperf_log
from runner.options import ReproduceOptions
from runner.plan import PLAN_FILE, SLURM, RunData, RunPlan, make_plan
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
from runner.run.cores import hold_cores
from runner.run.guards import RunGuards
from runner.run.allocation import check_nodes, cluster_network, require_network_setting
from runner.plan import CHECKPOINTS_DIR
from runner.initial_weights import INIT_DIR, INIT_RECORD, Tensor, undrawn_problem
from runner.run.init_weights import ensure_init, model_tensors, roles_for
from runner.run.training import TrainingRun, run_training
from runner.score.model_origin import CLASS4
from runner.score.probe import make_probe_inputs, probe_record
from runner.score.summary import summarize_training
from runner.timings import Timings, render_timings, training_parts
from runner.report import reporter
from runner.energy import training_energy
from runner.score.tta import EventStreamError, timeline
from runner.slurm import reproduce_on_slurm
from runner.slurm.submit import runner_command

# The crossing checkpoint is kept in the bundle up to this size (its sha256 always).
KEEP_CHECKPOINT_BYTES = 256 * 2**20


@dataclass
class Shared:
    """What the shared stages found, for every run of one reproduction (the plan says what
    the runs are; this is what the host, the data and the image turned out to be)."""

    engine: Engine
    built: BuiltImage
    staged: StagedData
    labels: object  # int64 array, or SQuAD's {id: answers}
    fingerprint: dict
    nonconforming: list[str] = field(default_factory=list)
    hardware: dict = field(default_factory=dict)  # result.json's hardware record
    inspection: ImageInspection | None = None
    # The phases every run of this reproduction shares (recorded in the first run's timings).
    timings: Timings = field(default_factory=Timings)
    public: list[StagedInput] = field(default_factory=list)  # the manifest's public inputs, mounted read-only
    isolation: dict | None = None  # why the engine could not isolate the runs (the host engine)


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


def _check_hardware(plan: RunPlan, fingerprint: dict):
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


def prepare(plan: RunPlan, scratch: Path, clock: Timings) -> tuple[RunPlan, Shared]:
    """The stages every run shares: the host, the data, the image and its inspection. Returns the
    plan as they resolved it (GPUs, backends, image, data) and what they found."""
    entry = plan.entry
    with clock.phase("preflight"):
        check_nodes(entry.nodes)
        engine = get_engine()
        if why := engine.refusal():
            raise UserError(why, engine.refusal_fix())
        network = cluster_network(engine, require_network_setting(entry.nodes)) if entry.nodes > 1 else None
        if removed := remove_orphans(engine):
            reporter().print(f"removed {removed} container(s) left by an earlier, killed run")
        if swept := ownership.sweep_scratch():
            reporter().print(f"removed {len(swept)} scratch folder(s) left by an earlier, killed run: "
                          + ", ".join(map(str, swept)))
        for killed in ownership.recover_killed_runs():
            reporter().print(f"marked {killed} incomplete: {ownership.KILLED_REASON}")
    with clock.phase("fingerprint"):
        fingerprint = capture_host(engine)
    hardware, reasons = _check_hardware(plan, fingerprint)
    host_gpus = len((fingerprint.get("gpu") or {}).get("gpus") or [])
    gpus = min(plan.profile.gpu_count, host_gpus)
    if gpus and not gpu_containers_possible(fingerprint):
        _, fix = engine.gpu_support(fingerprint.get("docker") or {})
        raise UserError(f"this host has {host_gpus} NVIDIA GPU(s) but the {engine.name} engine cannot "
                        "give them to containers", fix)
    backends = _choose_backends(plan, gpus)
    check_backends_available(backends, fingerprint)
    with clock.phase("data check"):
        staged = stage_data(entry, plan.smoke, scratch)
        public = stage_public_inputs(entry, plan.smoke, staged, scratch)
    if not staged.conforming and not plan.smoke:
        reasons.append(f"data set {staged.task} was staged from unofficial files")
    if staged.train_tree is not None and not staged.train_tree.conforming and not plan.smoke:
        reasons.append(f"the {staged.task} training tree was imported from unofficial files")
    on = "on this host's Python environment, no image" if engine.own_root else f"base {entry.base_image}"
    reporter().print(f"[bold]build[/] {entry.name} ({on})")
    with clock.phase("image check or build"):
        built = build_entry(entry, engine)
    reporter().print(
        f"  image {built.image_id[:19]}  {'cache hit' if built.cached else 'built'} "
        f"in {built.seconds:.1f} s"
    )
    isolation = None
    if why_not := engine.isolation(built.image_id):
        isolation = {"isolated": False, "engine": engine.name, "why_not": why_not}
        reporter().print(f"[yellow]{escape(why_not)}[/]")
    with clock.phase("image facts"):
        fingerprint = {**fingerprint, "image": capture_image(engine, built.image_id)}
    with clock.phase("image inspection"), reporter().status("inspecting the image for weights and data it should not carry"):
        def wheels() -> list[Path]:  # only on a cache miss: resolving them hashes every wheel
            if engine.own_root:  # nothing of the lock was installed
                return []
            return list(resolve_wheels(parse_lock(entry.lock_path)).values())

        inspection = inspect_image(engine, built.image_id, built.base.id, wheels, entry.path,
                            entry_files(entry.path), Path(staged.eval_dir) / "images.npy",
                            Path(staged.labels) / "eval_labels.npy", lock=entry.lock_path,
                            budget=budget_for(entry.task.id))
    if problem := inspection.problem():
        reasons.append(problem)
    with clock.phase("model tensors"):
        initial = initial_tensors(engine, entry, built.image_id, plan.limits, scratch)
    if problem := undrawn_problem(initial):
        reasons.append(f"{CLASS4}{problem}")
    runner = None
    if entry.nodes > 1:
        runner = runner_command()
    plan = plan.resolved(
        gpus=gpus, backends=backends, image=built.image_id, network=network, runner=runner,
        initial=tuple((t.name, t.shape, t.role) for t in initial),
        data=RunData(Path(staged.train_dir), Path(staged.eval_dir), staged.digest,
                     tuple((p.folder, p.mount) for p in public)),
    )
    return plan, Shared(engine, built, staged, staged.load_eval_labels(), fingerprint, reasons, hardware,
                        inspection, clock, public, isolation)


def initial_tensors(engine: Engine, entry: Entry, image: str, limits, scratch: Path) -> list[Tensor]:
    """The model's float tensors with the roles their initial values are drawn in: names and
    shapes from the entry's builder in the sandbox (kept by image), roles by the manifest."""
    listed = model_tensors(engine, image, entry, limits, scratch / "init-shapes.log")
    return roles_for(listed, entry.framework["name"], entry.initial_weights, bool(entry.public_inputs),
                     entry.task.cross_seed.public_width)


def _prepared(shared: Shared) -> assemble.Prepared:
    """What the shared stages found, as a run's record keeps it before training."""
    return assemble.Prepared(
        harness_digest(), shared.built, shared.staged, shared.hardware, tuple(shared.nonconforming),
        shared.inspection.summary() if shared.inspection else None, tuple(p.record() for p in shared.public),
        shared.isolation,
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

def open_result_folder(plan: RunPlan, shared: Shared, seed: int) -> Path:
    """A new run folder with what is known before training: the host, the image, the entry."""
    result_dir = entry_dir(paths.results_dir(), plan.entry.name, plan.smoke) / new_run_id(seed)
    (result_dir / "logs").mkdir(parents=True)
    write_json(result_dir / "fingerprint.json", shared.fingerprint)
    write_json(result_dir / "sbom.json", shared.built.sbom)
    built = shared.built  # the same packages in CycloneDX, each Python one with its hashes from the lock
    write_json(result_dir / CYCLONEDX_FILE, cyclonedx_document(built.sbom, parse_lock(plan.entry.lock_path),
                                                               built.image_id, built.tag, __version__))
    shutil.copyfile(plan.profile.path, result_dir / PROFILE_FILE)
    copy_entry_files(plan.entry, result_dir / "entry")
    if shared.inspection is not None:
        write_json(result_dir / INSPECTION_FILE, shared.inspection.to_dict())
    return result_dir


def train(plan: RunPlan, shared: Shared) -> TrainingRun:
    """The training container, its clock and the runner's evaluations of its checkpoints."""
    reporter().print(f"[bold]train[/] {plan.entry.name} seed {plan.seed} -> {plan.result_dir}")
    return run_training(shared.engine, plan, shared.labels)


def score(plan: RunPlan, shared: Shared, run: TrainingRun):
    """The training section, TTA and its verdicts, from the runner's events and predictions
    (``runner.score.summary.TrainingSummary``)."""
    summary = summarize_training(plan, run, shared.labels, shared.staged.counts.get("train"))
    _keep_crossing_checkpoint(plan.result_dir, summary.training.crossing)
    return summary


def training_energy_section(run: TrainingRun, verdict, crossing: int | None, result_dir: Path) -> dict | None:
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


def infer(plan: RunPlan, shared: Shared, result: Result) -> None:
    """Every evaluation item at batch 1 on each backend, gated on the threshold, and the
    checks that each timed the model that was scored."""
    weights = plan.output_dir / plan.entry.final_weights
    if not (plan.options.infer and result.status == "complete" and weights.is_file()):
        return
    reporter().print(f"[bold]infer[/] {', '.join(plan.backends)} (batch 1, every eval item)")
    # The backends were checked against this host's fingerprint when the plan was resolved.
    model = TrainedModel(plan.output_dir, shared.labels, whole_set=shared.staged.conforming)
    inference = run_inference(shared.engine, plan, model)
    assemble.inferred(result, inference, check_timed_model(result, inference, plan.result_dir))


def run_once(plan: RunPlan, shared: Shared, seed: int, scratch: Path,
             clock: Timings | None = None) -> Path:
    """One run, from its result folder to its final result.json. ``clock`` holds what was
    timed before it (the shared phases, for the first run); this run's phases are added."""
    clock = clock or Timings()
    with clock.phase("result folder"):
        result_dir = open_result_folder(plan, shared, seed)
        probe_dir = make_probe_inputs(shared.staged.eval_dir, scratch / f"probe-{result_dir.name}", seed)
        plan = plan.for_run(seed, result_dir, scratch, probe_dir)
        plan.write(result_dir)
        result = assemble.started(plan, _prepared(shared), probe_record(plan.entry.task, seed) if probe_dir else None)
        assemble.planned(result, PLAN_FILE, sha256_file(result_dir / PLAN_FILE))
        if (init := ensure_init(plan)) is not None:
            assemble.initialized(result, json.loads((init / INIT_RECORD).read_text()),
                                 f"{INIT_DIR}/{INIT_RECORD}", sha256_file(init / INIT_RECORD))
        result.write(result_dir)  # a crash from here on still leaves a record
        ownership.mark_running(result.run_id, result_dir)  # a SIGKILL from here on is recovered at next start
        guards = RunGuards(shared.engine, result.run_id, plan.limits.cpus, plan.output_dir,
                           gpus=plan.limits.gpus).start()
    started = time.monotonic()
    run = train(plan, shared)
    verdict = guards.stop()
    seconds = time.monotonic() - started
    before_start = run.started_monotonic - started if run.started_monotonic is not None else 0.0
    clock.add("training", seconds, training_parts(run.events, seconds, max(0.0, before_start)))
    with clock.phase("scoring"):
        summary = score(plan, shared, run)
        crossing = summary.training.crossing if summary.training.reached else None
        assemble.trained(result, run=run, summary=summary, guards=verdict,
                         energy=training_energy_section(run, verdict, crossing, result_dir),
                         train_samples=shared.staged.counts.get("train"),
                         training_usd=cost_usd(summary.training.tta_seconds, plan.profile, plan.entry.nodes)
                         if summary.training.reached else None)
        assemble.timed(result, clock.to_dict())
        result.write(result_dir)
    if run.outcome.interrupted:
        reporter().print(f"[red]interrupted[/]: the incomplete result is kept in {result_dir}")
        raise KeyboardInterrupt
    started = time.monotonic()
    infer(plan, shared, result)
    if result.inference:
        clock.add("inference", time.monotonic() - started, inference_parts(result.inference))
    with clock.phase("mlperf log"):
        written, note = write_mlperf_log(result_dir)
    if written:
        reporter().print(f"[bold]mlperf[/] log {written}")
        if note:  # the same for every run (the settings not made): said once
            reporter().warn_once(f"[yellow]MLPerf log[/]: {note}")
    else:
        reporter().print(f"[yellow]no MLPerf log[/]: {note}")
    result.write_last(result_dir, clock)  # its timings end with "writing"
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


def launch(plan: RunPlan, slurm=None, resume: bool = True) -> list[Path]:
    """Every run of the plan, where its placement says: on this host (each run in one
    container, one per rank on this host, or across the nodes of an allocation; see
    ``run_training``), or as the tasks of one Slurm job array (``runner.slurm``: ``slurm``
    its sbatch options, ``resume`` skips seeds already complete). Returns the run folders
    in seed order."""
    if plan.placement == SLURM:
        folders = reproduce_on_slurm(plan, slurm, resume)
        finish_runs(folders, _labels_here(plan), plan)  # gathered runs are signed here, once
        return folders
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
    opts = plan.options
    with ownership.scratch_folder() as tmp, sigterm_as_interrupt():
        clock = Timings()
        plan, shared = prepare(plan, Path(tmp), clock)
        folders: list[Path] = []
        try:
            for i, seed in enumerate(plan.seeds):
                clock = shared.timings if i == 0 else Timings()  # the shared phases count once
                waited = time.monotonic()
                with hold_cores(plan.limits.cpus, reporter().print, plan.entry.name):
                    if (held := time.monotonic() - waited) > 0.05:
                        clock.add("waiting for cores", held)
                    folder = run_once(plan, shared, seed, Path(tmp), clock)
                    settle_outputs(folder)  # outputs verify would refuse: left out, named, before the record
                    record_measured(folder)  # what it measured, kept outside the folder from now on
                    ownership.mark_finished(folder.name)
                folders.append(folder)
        except BaseException:  # the runs that ended before the failure are finished all the same
            try:
                finish_runs(folders, shared.labels, plan)
            except Exception as exc:  # the failure that stopped the runs is the one to raise
                reporter().print(f"[yellow]the runs that ended were not finished[/]: {exc}", highlight=False)
            raise
        signing = finish_runs(folders, shared.labels, plan)
    if opts.verbose:
        for folder in folders:
            timings = Result.read(folder).timings or {}
            reporter().print(render_timings(timings, f"where the time of {short_id(folder.name)} went"))
            if folder in signing:
                reporter().print(f"  then signing: {signing[folder]:.2f} s (after result.json was final)")
    return folders


FINISHING = "signing the finished run"
ACROSS_SEEDS = ("training.cross_seed", "conforming", "nonconforming_reasons")  # what mark_alike_runs writes


def finish_runs(folders: list[Path], labels, plan: RunPlan) -> dict[Path, float]:
    """The end of the runs that ended: their cross-seed records (``mark_alike_runs``; for one
    run, the record that none is possible), then each folder, now finished, signed once, held
    to the runner's record of what the run measured (``record_measured`` as each run ended)
    for everything but those records (``ACROSS_SEEDS``); with ``--no-sign`` the record is only
    brought up to date (``runner bundle sign`` may sign the run later, as it was measured).
    Nothing writes into a folder after this. Gathered Slurm runs (signed here, by the submit
    host) skip a placeholder and a run signed before whose result did not change. Returns the
    seconds each signing took."""
    if not folders:
        return {}
    gathered = plan.placement == SLURM
    changed = set(mark_alike_runs(folders, labels, plan))
    signing = {}
    for folder in folders:
        if gathered and (folder not in changed and (folder / MANIFEST).is_file()):
            continue
        if gathered and measured_record(folder) is None:
            if folder in changed:  # a run gathered before this host kept records: its bundle is now stale
                reporter().print(f"[yellow]not signed again[/] {short_id(folder.name)}: this runner has no record "
                                 "of measuring it; `runner reproduce` the seed again", highlight=False)
            continue
        started = time.monotonic()
        if plan.options.sign or gathered:
            sign_folder(folder, again=FINISHING, fields=ACROSS_SEEDS)
            signing[folder] = time.monotonic() - started
        else:
            require_measured(folder, FINISHING, fields=ACROSS_SEEDS)
            record_measured(folder)
    return signing


def mark_alike_runs(folders: list[Path], labels, plan: RunPlan) -> list[Path]:
    """Each run's cross-seed record (``training.cross_seed``); runs whose crossing models are
    not independent across seeds are non-conforming (``runner.score.across_runs``). Returns
    the folders whose result changed."""
    from runner.score.across_runs import across_runs  # lazy: start-up (runner --help)

    changed = []
    found = across_runs(folders, labels, plan.entry.task, plan.entry.framework["name"], plan.options.seed is None,
                        earlier_signed_runs(plan, folders))
    for folder, (record, reasons) in found.items():
        result = Result.read(folder)
        for reason in assemble.compared_across_seeds(result, record, reasons):
            reporter().print(f"[yellow]non-conforming[/] {short_id(result.run_id)}: {reason}")
        result.write(folder)
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
