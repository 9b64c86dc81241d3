"""``runner reproduce``: every stage of a reproduction, in the order it runs.

check the host -> stage data -> build the image -> train (the harness keeps the clock)
-> score and compute TTA -> infer (batch 1, gated) -> fingerprint -> result -> bundle.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import docker
from rich.console import Console

from runner import __version__, data, paths
from runner.build import BuiltImage, build_entry
from runner.bundle import make_bundle
from runner.engine import get_client
from runner.errors import UserError
from runner.fingerprint import capture_host, capture_image
from runner.infer import check_backends_available, run_inference
from runner.keys import load_signer
from runner.manifest import Entry, load_entry
from runner.data import StagedData
from runner.profiles import Profile, cost_usd, load_profile, price_fields, require_match
from runner.results import RESULT_SCHEMA_VERSION, new_run_id, summarize_runs, write_json
from runner.run.container import remove_orphans
from runner.run.events import write_events
from runner.run.training import TrainingInputs, run_training
from runner.score.curve import write_curve
from runner.score.evaluations import score_evaluations
from runner.score.tta import EventStreamError, time_to_accuracy, timeline

CPU_BACKENDS = ("torch", "onnxruntime")
SMOKE_SIZES = {"n_train": 2048, "n_eval": 512}


@dataclass
class ReproduceOptions:
    runs: int | None = None
    seed: int | None = None
    smoke: bool = False
    allow_hardware_mismatch: bool = False
    backends: list[str] | None = None
    timeout_minutes: float | None = None
    infer: bool = True
    sign: bool = True  # False on Slurm compute nodes: the submit host signs what it gathers


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
        of=entry.name, also="or --smoke for a quick CPU check",
    )
    reasons = ["smoke run: one short epoch on synthetic data"] if opts.smoke else []
    if record["mismatches"]:
        reasons.append("hardware mismatch: " + "; ".join(record["mismatches"]))
    return record, reasons


def gpu_containers_possible(fingerprint: dict) -> bool:
    """Can the engine hand GPUs to a container? Docker's --gpus works through the NVIDIA
    Container Toolkit: either its runtime is registered or its prestart hook is installed."""
    if (fingerprint.get("docker") or {}).get("nvidia_runtime"):
        return True
    return any(shutil.which(tool) for tool in ("nvidia-container-runtime-hook", "nvidia-container-cli"))


def _choose_backends(entry: Entry, opts: ReproduceOptions, gpus: int) -> list[str]:
    backends = opts.backends or list(entry.inference.backends)
    if opts.smoke and gpus == 0:
        # A smoke run checks the pipeline on CPU; GPU-only backends cannot run there.
        backends = [b for b in backends if b in CPU_BACKENDS] or ["torch"]
    return backends


def _stage_data(entry: Entry, opts: ReproduceOptions, console: Console, scratch: Path):
    if opts.smoke:
        return data.synthetic(entry.task.id, scratch / "smoke-data", seed=0, **SMOKE_SIZES)
    try:
        return data.staged(entry.task.id)
    except UserError:
        if entry.task.id not in data.PREPARABLE:
            raise
        console.print(f"[bold]data[/] {entry.task.id} is not staged yet: preparing it")
        return data.prepare(entry.task.id)


def prepare(entry_path: str, opts: ReproduceOptions, console: Console, scratch: Path) -> RunContext:
    entry = load_entry(entry_path)
    if opts.smoke:
        entry = entry.for_smoke()
    profile = load_profile(entry.hardware_profile)
    client = get_client()
    if removed := remove_orphans(client):
        console.print(f"removed {removed} container(s) left by an earlier, killed run")
    fingerprint = capture_host(client)
    hardware, reasons = _check_hardware(entry, profile, fingerprint, opts)
    host_gpus = len((fingerprint.get("gpu") or {}).get("gpus") or [])
    gpus = min(profile.gpu_count, host_gpus)
    if gpus and not gpu_containers_possible(fingerprint):
        raise UserError(
            f"this host has {host_gpus} NVIDIA GPU(s) but the Docker engine cannot give them "
            "to containers",
            "install the NVIDIA Container Toolkit (nvidia-container-toolkit), run "
            "`nvidia-ctk runtime configure --runtime=docker` and restart dockerd",
        )
    backends = _choose_backends(entry, opts, gpus)
    check_backends_available(backends, fingerprint)
    staged = _stage_data(entry, opts, console, scratch)
    if not staged.conforming and not opts.smoke:
        reasons.append(f"data set {staged.task} was staged from unofficial files")
    console.print(f"[bold]build[/] {entry.name} (base {entry.base_image})")
    built = build_entry(entry, client)
    console.print(
        f"  image {built.image_id[:19]}  {'cache hit' if built.cached else 'built'} "
        f"in {built.seconds:.1f} s"
    )
    fingerprint = {**fingerprint, "image": capture_image(client, built.image_id)}
    return RunContext(
        entry, profile, client, built, staged, staged.load_eval_labels(), fingerprint,
        backends, gpus, reasons, hardware,
    )


def _train_env(ctx: RunContext, seed: int, smoke: bool) -> dict[str, str]:
    limits = ctx.profile.container_limits
    # CPU profiles grant a number of cores; GPU profiles get the whole host's CPUs.
    threads = int(limits.cpus) if limits and limits.cpus else os.cpu_count() or 1
    return {
        "RUNNER_TASK": ctx.entry.task.id,
        "RUNNER_SEED": str(seed),
        "RUNNER_DATA": "/data",
        "RUNNER_OUTPUT": "/output",
        "RUNNER_THREADS": str(threads),
        "RUNNER_THRESHOLD": repr(ctx.entry.task.threshold),
        "RUNNER_SMOKE": "1" if smoke else "0",
        "HOME": "/scratch",
    }


def _base_result(ctx: RunContext, run_id: str, seed: int, opts: ReproduceOptions) -> dict:
    entry, task = ctx.entry, ctx.entry.task
    return {
        "schema_version": RESULT_SCHEMA_VERSION,
        "run_id": run_id,
        "toolkit": {"name": "runner", "version": __version__, "harness_sha256": harness_digest()},
        "entry": {
            "name": entry.name,
            "model": entry.model,
            "framework": entry.framework,
            "source": entry.source,
            "claimed": entry.claimed,
            "digests": entry.digests(),
        },
        "task": {
            "id": task.id, "metric": task.metric, "threshold": task.threshold,
            "eval_size": task.eval_size,
        },
        "seed": seed,
        "smoke": opts.smoke,
        "status": "running",
        "incomplete_reason": None,
        "conforming": not ctx.nonconforming,
        "nonconforming_reasons": list(ctx.nonconforming),
        "image": {
            "id": ctx.built.image_id, "tag": ctx.built.tag, "base_id": ctx.built.base.id,
            "base_tag": ctx.built.base.tag,
        },
        "data": {"task": task.id, "digest": ctx.staged.digest, "source": ctx.staged.source},
        "training": None,
        "cost": {"training_usd": None, **price_fields(ctx.profile)},
        "inference": {},
        "hardware": ctx.hardware,
    }


def run_once(ctx: RunContext, seed: int, opts: ReproduceOptions, console: Console) -> Path:
    entry = ctx.entry
    run_id = new_run_id(seed)
    result_dir = paths.results_dir() / entry.name / run_id
    (result_dir / "logs").mkdir(parents=True)
    write_json(result_dir / "fingerprint.json", ctx.fingerprint)
    write_json(result_dir / "sbom.json", ctx.built.sbom)
    shutil.copyfile(ctx.profile.path, result_dir / "profile.yaml")
    result = _base_result(ctx, run_id, seed, opts)
    write_json(result_dir / "result.json", result)  # a crash from here on still leaves a record

    limits = ctx.profile.container_limits
    timeout_min = opts.timeout_minutes or entry.train.timeout_minutes
    console.print(f"[bold]train[/] {entry.name} seed {seed} -> {result_dir}")
    run = run_training(
        ctx.client, entry.task, ctx.labels,
        TrainingInputs(
            image=ctx.built.image_id, command=entry.train.command, train_dir=ctx.staged.train_dir,
            eval_dir=ctx.staged.eval_dir, result_dir=result_dir,
            env=_train_env(ctx, seed, opts.smoke),
            cpus=limits.cpus if limits else None, memory=limits.memory if limits else None,
            gpus=ctx.gpus, timeout_s=timeout_min * 60,
        ),
    )
    write_events(result_dir / "events.jsonl", run.events)
    result["status"] = "complete" if run.outcome.ok else "incomplete"
    result["incomplete_reason"] = run.outcome.reason()
    result["training"] = training = {"wall_seconds": round(run.outcome.wall_seconds, 6)}
    try:
        line = timeline(run.events)
    except EventStreamError as exc:
        line = None
        if result["status"] == "complete":
            result["status"], result["incomplete_reason"] = "invalid", f"event stream: {exc}"
    if line is not None:
        scored = score_evaluations(entry.task, line, result_dir / "output", ctx.labels)
        tta = time_to_accuracy(line, [s.meets for s in scored])
        problems = [f"evaluation {s.index}: {s.problem}" for s in scored if s.problem]
        if problems and result["status"] == "complete":
            result["status"], result["incomplete_reason"] = "invalid", "; ".join(problems)
        write_curve(result_dir / "curve.tsv", entry.task, line, scored)
        training.update(
            reached=tta.reached and result["status"] != "invalid",
            tta_seconds=tta.seconds,
            tta_hours=tta.seconds / 3600 if tta.seconds is not None else None,
            startup_seconds=line.run_start,
            excluded_eval_seconds=tta.excluded_eval_seconds,
            crossing=tta.crossing,
            evaluations=[s.to_dict() for s in scored],
        )
        if training["reached"]:
            result["cost"]["training_usd"] = cost_usd(tta.seconds, ctx.profile)
    else:
        training["reached"] = False
    write_json(result_dir / "result.json", result)
    if run.outcome.interrupted:
        console.print(f"[red]interrupted[/]: the incomplete result is kept in {result_dir}")
        raise KeyboardInterrupt

    weights = result_dir / "output" / entry.inference.weights
    if opts.infer and result["status"] == "complete" and weights.is_file():
        console.print(f"[bold]infer[/] {', '.join(ctx.backends)} (batch 1, every eval item)")
        result["inference"] = run_inference(
            ctx.client, entry, ctx.built.image_id, result_dir, ctx.staged, ctx.backends,
            ctx.profile,
        )
        write_json(result_dir / "result.json", result)
    return result_dir


def sign(result_dir: Path, console: Console) -> None:
    signer = load_signer()
    bundle = make_bundle(result_dir, signer)
    if signer is None:
        console.print(
            "[yellow]not signed[/]: no signing key is configured. "
            "Fix: run `runner keys generate`, then `runner reproduce` again"
        )
    else:
        console.print(f"[bold]bundle[/] signed by key {bundle.keyid[:16]}")


def reproduce(entry_path: str, opts: ReproduceOptions, console: Console) -> list[Path]:
    """Run an entry ``runs`` times; return each run's result folder."""
    with tempfile.TemporaryDirectory(prefix="runner-") as tmp, sigterm_as_interrupt():
        ctx = prepare(entry_path, opts, console, Path(tmp))
        first_seed = ctx.entry.seed if opts.seed is None else opts.seed
        runs = opts.runs or ctx.entry.runs
        folders = []
        for i in range(runs):
            folder = run_once(ctx, first_seed + i, opts, console)
            if opts.sign:
                sign(folder, console)
            folders.append(folder)
    return folders


def summarize(folders: list[Path]):
    ttas = []
    for folder in folders:
        training = json.loads((folder / "result.json").read_text()).get("training") or {}
        ttas.append(training.get("tta_seconds") if training.get("reached") else None)
    return summarize_runs(ttas)
