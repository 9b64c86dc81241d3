"""The run plan: the one description of a reproduction, in frozen states, in run order.

``make_plan`` builds a ``RunPlan`` (what was asked) from the entry folder and the user's
flags: the manifest (its smoke form on a smoke run), the hardware profile, the seeds (the
runner's, each drawn on its own, or the auditor's ``--seed``: ``seed, seed+1, ...`` for the
manifest's ``runs`` or ``--runs``; never the entry's), where it runs (this host or a Slurm
job array), the engine and the limits. The shared stages then fix what they found
(``RunPlan.resolved`` -> ``ResolvedPlan``: the GPUs the host gives, the backends, the image,
the staged data, none of it optional), and each run its own part (``ResolvedPlan.for_run`` ->
``SeedRun``: its seed, its result folder). Beside them, ``Prepared`` is what the shared stages
found (the engine, the image, the data, the labels, the fingerprint, the inspection). Every
stage, the evaluator, the node agents of a run spanning nodes and ``runner audit --replay``
read these frozen objects; a run's plan is saved with its result as ``plan.json``.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Self

from runner.engine.kinds import current
from runner.errors import UserError
from runner.manifest import Entry, load_entry
from runner.manifest.switches import chosen, turned_off
from runner.options import ReproduceOptions
from runner.profiles import Profile, load_profile

if TYPE_CHECKING:
    from runner.data.public_inputs import StagedInput
    from runner.data.store import EvalLabels, StagedData
    from runner.engine import Engine
    from runner.entry_build.entry_image import BuiltImage
    from runner.entry_build.image_inspection import ImageInspection

LOCAL, SLURM = "local", "slurm"
PLAN_FILE = "plan.json"
EVALUATIONS_DIR, CHECKPOINTS_DIR = "evaluations", "checkpoints"


@dataclass(frozen=True)
class Limits:
    """What each of the run's containers gets."""

    cpus: float | None  # --cpus (a CPU profile's cores); None: the host's
    memory: str | int | None
    gpus: int  # the run's GPUs on each node (the profile's, as many as the host has)
    threads: int  # RUNNER_THREADS: the cores granted, or the host's CPUs
    timeout_s: float  # the training container's wall-time limit

    @property
    def evaluator_timeout_s(self) -> float:
        return self.timeout_s + 3600


@dataclass(frozen=True)
class RunData:
    """The staged data the run's containers mount (read-only)."""

    train_dir: Path
    eval_dir: Path  # the evaluator's: never mounted into a training container
    digest: str  # every node's staged data must have it
    public: tuple[tuple[Path, str], ...] = ()  # (host folder, container path) of declared public inputs


@dataclass(frozen=True, kw_only=True)
class RunPlan:
    """What was asked: the entry, its profile, the user's options, the seeds, the placement,
    the engine's kind and the limits. ``resolved`` turns it into the plan the shared stages
    fixed; nothing in it is filled in later."""

    entry: Entry  # the manifest, in its smoke form on a smoke run
    profile: Profile
    options: ReproduceOptions
    seeds: tuple[int, ...]
    placement: str  # LOCAL or SLURM
    engine: str  # runner.engine.kinds: docker or podman
    limits: Limits
    backends: tuple[str, ...] = ()
    hyperparameters: dict[str, str] = field(default_factory=dict)

    # -- what the plan names ------------------------------------------------------------
    @property
    def entry_name(self) -> str:
        return self.entry.name

    @property
    def task(self) -> str:
        return self.entry.task.id

    @property
    def smoke(self) -> bool:
        return self.options.smoke

    @property
    def timeout_s(self) -> float:
        return self.limits.timeout_s

    def switch_env(self) -> dict[str, str]:
        """``RUNNER_SWITCH_*=0`` for each declared switch a study turned off (none by default)."""
        if not self.options.switches_off:
            return {}
        env, _ = turned_off(self.entry.switches, self.options.switches_off, self.entry.hyperparameters,
                            self.entry.name)
        return env

    @property
    def variant(self) -> dict | None:
        """result.json's ``variant``: how the run departs from the entry's declared recipe (the
        switches a study turned off, in the manifest's order) and placement (a scaling study's
        nodes and processes); None when it does not."""
        variant: dict[str, list[str] | int] = {}
        if self.options.switches_off:
            variant["switches_off"] = [s.name for s in chosen(self.entry.switches, self.options.switches_off,
                                                              self.entry.name)]
        declared = (self.entry.raw.get("nodes", 1), self.entry.raw.get("processes_per_node", 1))
        if (self.entry.nodes, self.entry.processes_per_node) != declared:
            variant.update(nodes=self.entry.nodes, processes_per_node=self.entry.processes_per_node)
        return variant or None

    # -- the next state -------------------------------------------------------------------
    def resolved(self, *, gpus: int, backends: list[str] | tuple[str, ...], image: str, data: RunData,
                 network: str | None = None, runner: list[str] | tuple[str, ...] = (),
                 initial: tuple[tuple[str, tuple[int, ...], str], ...] = ()) -> ResolvedPlan:
        """The plan once the shared stages ran: the host's GPUs, the backends, the image, the
        data, the model's tensors the initial weights are drawn for."""
        asked = {**_fields_of(self, RunPlan), "limits": replace(self.limits, gpus=gpus), "backends": tuple(backends)}
        return ResolvedPlan(**asked, image=image, data=data, network=network, runner=tuple(runner),
                            initial=tuple(initial))

    # -- saved with the result, sent to node agents -------------------------------------
    def to_dict(self) -> dict:
        return {
            "entry": str(self.entry.path.resolve()), "entry_name": self.entry.name, "task": self.task,
            "profile": self.profile.id, "options": asdict(self.options), "seeds": list(self.seeds),
            "placement": self.placement, "engine": self.engine, "limits": asdict(self.limits),
            "backends": list(self.backends), "hyperparameters": dict(self.hyperparameters),
            "image": None, "data": None, "network": None, "runner": [], "initial": [],
            "seed": None, "result_dir": None, "probe_dir": None,
        }

    def write(self, folder: Path) -> None:
        (folder / PLAN_FILE).write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")

    @classmethod
    def from_dict(cls, d: dict, entry_path: Path | None = None, scratch: Path | None = None) -> RunPlan:
        """A plan sent by the runner (a node agent) or saved with a result (a replay, whose
        ``entry_path`` is the bundle's own copy of the entry), as far as it went: a
        ``SeedRun`` when it names a run's seed and folder (``scratch``: the host-only folder
        of its evaluator's requests; by default ``scratch`` beside its result folder, created
        by nothing here), a ``ResolvedPlan`` when it names the image and data."""
        known = {f.name for f in fields(ReproduceOptions)}
        options = ReproduceOptions(**{k: v for k, v in d["options"].items() if k in known})
        options = replace(options, switches_off=tuple(options.switches_off))  # a JSON list
        plan = RunPlan(entry=entry_for(entry_path or d["entry"], options), profile=load_profile(d["profile"]),
                   options=options, seeds=tuple(d["seeds"]), placement=d["placement"], engine=d["engine"],
                   limits=Limits(**d["limits"]), backends=tuple(d.get("backends") or ()),
                   hyperparameters=dict(d.get("hyperparameters") or {}))
        data = d.get("data")
        if not (d.get("image") and data):
            return plan
        resolved = plan.resolved(
            gpus=plan.limits.gpus, backends=plan.backends, image=d["image"],
            data=RunData(Path(data["train_dir"]), Path(data["eval_dir"]), data["digest"],
                         tuple((Path(h), c) for h, c in data.get("public") or ())),
            network=d.get("network"), runner=tuple(d.get("runner") or ()),
            initial=tuple((str(n), tuple(int(x) for x in shape), str(r)) for n, shape, r in d.get("initial") or ()))
        if d.get("seed") is None or not d.get("result_dir"):
            return resolved
        result_dir = Path(d["result_dir"])
        return resolved.for_run(int(d["seed"]), result_dir, scratch or result_dir / "scratch",
                                Path(d["probe_dir"]) if d.get("probe_dir") else None)

    @classmethod
    def read(cls, folder: Path, entry_path: Path | None = None) -> Self | None:
        """The plan saved in a result folder (``SeedRun.read``: the run's; a plan that went
        less far is a ``ValueError``); None for a result written before plans were saved."""
        path = folder / PLAN_FILE
        if not path.is_file():
            return None
        plan = RunPlan.from_dict(json.loads(path.read_text()), entry_path)
        if not isinstance(plan, cls):
            raise ValueError(f"{path} describes a plan, not a {cls.__name__}")
        return plan


@dataclass(frozen=True, kw_only=True)
class ResolvedPlan(RunPlan):
    """The plan as the shared stages fixed it: the image built, the data staged, and, on a run
    spanning nodes, its network and how another node starts the runner."""

    image: str
    data: RunData
    network: str | None = None  # the cluster network of a run spanning nodes (none on one node)
    runner: tuple[str, ...] = ()  # how another node starts the runner (its node agent)
    # The model's float tensors as (name, shape, role): what the runner draws each run's
    # initial weights for (runner.run.init_weights), from the entry's builder in the sandbox.
    initial: tuple[tuple[str, tuple[int, ...], str], ...] = ()

    def for_run(self, seed: int, result_dir: Path, scratch: Path, probe_dir: Path | None = None) -> SeedRun:
        """One run of the plan: its seed, its result folder, the host-only scratch folder of its
        evaluator's requests, and the runner's perturbed probe inputs (when the task has them)."""
        return SeedRun(**_fields_of(self, ResolvedPlan), seed=seed, result_dir=result_dir, scratch=scratch, probe_dir=probe_dir)

    def to_dict(self) -> dict:
        return {**super().to_dict(), "image": self.image, "network": self.network, "runner": list(self.runner),
                "data": {"train_dir": str(self.data.train_dir), "eval_dir": str(self.data.eval_dir),
                         "digest": self.data.digest, "public": [[str(h), c] for h, c in self.data.public]},
                "initial": [[name, list(shape), role] for name, shape, role in self.initial]}


@dataclass(frozen=True, kw_only=True)
class SeedRun(ResolvedPlan):
    """One run of a resolved plan: what every stage of the run reads."""

    seed: int
    result_dir: Path
    scratch: Path  # host-only, removed after the reproduction
    probe_dir: Path | None = None  # the runner's perturbed probe inputs (tasks without them: none)

    @property
    def run_id(self) -> str:
        """This run's id: its result folder's name."""
        return self.result_dir.name

    @property
    def run_name(self) -> str:
        """The prefix of this run's containers (one per rank)."""
        return f"runner-{self.run_id}".lower()

    @property
    def sensitivity_seed(self) -> int:
        """How the sensitivity check permutes a checkpoint's tensors (drawn from the run's seed)."""
        return self.seed ^ 0x5EED

    @property
    def output_dir(self) -> Path:
        return self.result_dir / "output"

    @property
    def checkpoints_dir(self) -> Path:
        return self.result_dir / CHECKPOINTS_DIR

    @property
    def evaluations_dir(self) -> Path:
        return self.result_dir / EVALUATIONS_DIR

    @property
    def requests_dir(self) -> Path:
        return self.scratch / "evaluator-requests"

    @property
    def evaluator_outbox(self) -> Path:
        """Where the evaluator writes its answers; the runner copies each into
        ``evaluations_dir`` as it arrives (``runner.run.evaluator``)."""
        return self.scratch / "evaluator-out" / self.run_id

    def log(self, name: str) -> Path:
        return self.result_dir / "logs" / name

    def train_env(self) -> dict[str, str]:
        """The training container's environment (the run contract's variables)."""
        return {
            "RUNNER_TASK": self.entry.task.id,
            "RUNNER_SEED": str(self.seed),
            "RUNNER_DATA": "/data",
            "RUNNER_OUTPUT": "/output",
            "RUNNER_THREADS": str(self.limits.threads),
            "RUNNER_THRESHOLD": repr(self.entry.task.threshold),
            "RUNNER_SMOKE": "1" if self.smoke else "0",
            "HOME": "/scratch",
            **{f"RUNNER_HP_{name.upper()}": value for name, value in self.hyperparameters.items()},
            **self.switch_env(),
        }

    def to_dict(self) -> dict:
        return {**super().to_dict(), "seed": self.seed, "result_dir": str(self.result_dir.resolve()),
                "probe_dir": str(self.probe_dir) if self.probe_dir else None}


@dataclass(frozen=True)
class Prepared:
    """What the shared stages found, for every run of one reproduction (the plan says what the
    runs are; this is what the host, the data and the image turned out to be). Made once by
    ``runner.reproduce.prepare``; every run's record starts from it (``assemble.started``)."""

    engine: Engine
    built: BuiltImage
    staged: StagedData
    labels: EvalLabels  # the evaluation labels (SQuAD: {id: answers}), loaded once
    fingerprint: dict  # fingerprint.json: the host and the image
    hardware: dict  # result.json's hardware record
    nonconforming: tuple[str, ...]  # reasons every run is non-conforming already
    inspection: ImageInspection
    public: tuple[StagedInput, ...]  # the manifest's public inputs, mounted read-only
    isolation: dict | None  # why the engine could not isolate the runs (the host engine); None: it did
    harness_digest: str  # sha256 over the container-side harness the runs use


def _fields_of(plan: RunPlan, state: type[RunPlan]) -> dict:
    """``plan``'s values of the fields of ``state`` (one of its earlier states), to build the
    next state from."""
    return {f.name: getattr(plan, f.name) for f in fields(state)}


def sent_run(d: dict, scratch: Path) -> SeedRun:
    """One run's plan as the runner sent it to a node agent (``scratch``: the node's own)."""
    plan = RunPlan.from_dict(d, scratch=scratch)
    if not isinstance(plan, SeedRun):
        raise ValueError("the runner sent a plan that names no run (its seed and result folder)")
    return plan


def entry_for(path: str | Path, options: ReproduceOptions) -> Entry:
    """The entry a plan runs: its manifest, in its smoke form on a smoke run, placed on the
    nodes and processes the options ask for."""
    entry = load_entry(path)
    if options.smoke:
        entry = entry.for_smoke()
    return entry.placed(options.nodes, options.processes_per_node)


def make_plan(entry_path: str | Path, opts: ReproduceOptions, placement: str = LOCAL) -> RunPlan:
    """The plan of a reproduction, from the entry folder and the user's flags."""
    entry = entry_for(entry_path, opts)
    profile = load_profile(entry.hardware_profile)
    runs = opts.runs or entry.runs
    limits = profile.container_limits
    # CPU profiles grant a number of cores; GPU profiles get the whole host's CPUs.
    threads = int(limits.cpus) if limits and limits.cpus else os.cpu_count() or 1
    return RunPlan(
        entry=entry, profile=profile, options=opts, seeds=draw_seeds(runs, opts.seed),
        placement=placement, engine=current().name,
        limits=Limits(cpus=limits.cpus if limits else None, memory=limits.memory if limits else None,
                      gpus=profile.gpu_count, threads=threads,
                      timeout_s=(opts.timeout_minutes or entry.train.timeout_minutes) * 60),
        backends=tuple(opts.backends or entry.inference.backends),
        hyperparameters=_hyperparameters(entry, opts),
    )


def draw_seeds(runs: int, first: int | None = None) -> tuple[int, ...]:
    """The runs' seeds: each drawn on its own, distinct, so that no run's seed (and so no run's
    initial weights) can be foreseen from another's; the auditor's ``--seed`` gives
    ``first, first+1, ...`` instead."""
    if first is not None:
        return tuple(range(first, first + runs))
    seeds: list[int] = []
    while len(seeds) < runs:
        if (seed := secrets.randbelow(2**31)) not in seeds:
            seeds.append(seed)
    return tuple(seeds)


def _hyperparameters(entry: Entry, opts: ReproduceOptions) -> dict[str, str]:
    """The declared hyperparameters the runner passes: a study's choice, or the batch size that
    turns a switch off (not both: each would undo the other)."""
    _, switched = turned_off(entry.switches, opts.switches_off, entry.hyperparameters, entry.name)
    if switched and opts.hyperparameters:
        raise UserError("a run cannot both choose the batch size and turn off a switch that sets it",
                        "turn off the switch, or choose the hyperparameters, not both")
    return {**opts.hyperparameters, **switched}


def plan_of_task(plan_file: Path, seed: int) -> RunPlan:
    """One Slurm array task's plan: the submitter's plan (``plan.json`` beside the job script)
    for one of its seeds, run on this node with this node's engine; the submit host signs."""
    try:
        plan = RunPlan.from_dict(json.loads(Path(plan_file).read_text()))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"cannot read the run plan {plan_file}: {exc}",
                        "pass the plan.json that `runner reproduce --slurm` wrote beside its job script") from None
    if seed not in plan.seeds:
        raise UserError(f"seed {seed} is not one of the plan's seeds {list(plan.seeds)}",
                        "pass --seed with a seed from the job's seeds.txt")
    return replace(plan, seeds=(seed,), placement=LOCAL, engine=current().name,
                   options=replace(plan.options, seed=seed, runs=1, sign=False))
