"""Load and validate an entry folder into a typed ``Entry``."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import jsonschema

from runner.claims import check_claim_profile
from runner.errors import UserError
from runner.harness.backends import backends_for
from runner.manifest.entry_folder import inside_entry, plain_files, relative_problem
from runner.manifest.schema import ENTRY_SCHEMA
from runner.manifest.switches import Switch, parse as parse_switches
from runner.manifest.untrusted_yaml import load_untrusted_yaml
from runner.tasks import Task, get_task


@dataclass(frozen=True)
class TrainSpec:
    command: list[str]
    timeout_minutes: float = 60


@dataclass(frozen=True)
class SmokeSpec:
    """Overrides for --smoke runs, so a GPU entry can be checked on a CPU-only host."""

    command: list[str] | None = None
    base_image: str | None = None
    lock: str | None = None


@dataclass(frozen=True)
class InferenceSpec:
    builder: str
    weights: str
    backends: list[str] = field(default_factory=lambda: ["torch"])
    warmup: int = 100
    threads: int = 1
    opset: int = 17
    fp16: bool = False
    builder_seconds: float = 30.0  # the run contract's default; the schema caps it at 120


@dataclass(frozen=True)
class Hyperparameters:
    """The tunable hyperparameters an entry declares, and the rule tying its LR to the batch."""

    default_batch_size: int
    base_lr: float
    lr_scaling: str = "linear"  # linear, sqrt or none

    def lr_for(self, batch_size: int) -> float:
        ratio = batch_size / self.default_batch_size
        return self.base_lr * {"linear": ratio, "sqrt": ratio ** 0.5, "none": 1.0}[self.lr_scaling]

    def for_batch_size(self, batch_size: int) -> dict[str, str]:
        """The values the runner passes (as RUNNER_HP_<NAME>) to train at ``batch_size``."""
        return {"global_batch_size": str(batch_size), "lr": repr(round(self.lr_for(batch_size), 10))}


@dataclass(frozen=True)
class Entry:
    path: Path
    name: str
    task: Task
    framework: dict
    model: str
    hardware_profile: str
    base_image: str
    lock: str
    train: TrainSpec
    inference: InferenceSpec
    runs: int = 1
    nodes: int = 1  # machines one run spans
    processes_per_node: int = 1  # training processes (containers) per machine
    claimed: dict = field(default_factory=dict)
    smoke: SmokeSpec = field(default_factory=SmokeSpec)
    source: str | None = None
    description: str = ""
    hyperparameters: Hyperparameters | None = None
    public_inputs: tuple[str, ...] = ()  # declared public artifacts (runner.data.public_inputs)
    switches: tuple[Switch, ...] = ()  # the recipe's optimizations (runner.manifest.switches)
    # (glob on the checkpoint's tensor names, role): how the runner draws those tensors'
    # initial values (runner.run.init_weights ROLES); unnamed tensors take their default role
    initial_weights: tuple[tuple[str, str], ...] = ()
    raw: dict = field(default_factory=dict, repr=False)

    @property
    def world_size(self) -> int:
        """Training processes of one run, over all its machines."""
        return self.nodes * self.processes_per_node

    @property
    def manifest_path(self) -> Path:
        return self.path / "entry.yaml"

    @property
    def dockerfile_path(self) -> Path:
        return self.path / "Dockerfile"

    @property
    def lock_path(self) -> Path:
        return self.path / self.lock

    @property
    def final_weights(self) -> str:
        """``inference.weights`` relative to /output (it may be given absolute, under /output)."""
        return self.inference.weights.removeprefix("/output/").lstrip("/")

    def for_smoke(self) -> "Entry":
        """The entry as a --smoke run builds and runs it."""
        return replace(
            self,
            base_image=self.smoke.base_image or self.base_image,
            lock=self.smoke.lock or self.lock,
            train=replace(self.train, command=self.smoke.command or self.train.command),
        )

    def placed(self, nodes: int | None, processes_per_node: int | None) -> "Entry":
        """The entry run on another placement than its manifest's (``runner study scaling``)."""
        return replace(self, nodes=nodes or self.nodes,
                       processes_per_node=processes_per_node or self.processes_per_node)

    def digests(self) -> dict[str, str]:
        """sha256 of manifest, Dockerfile and lock: the entry's identity in labels and bundles."""
        return {
            name: hashlib.sha256(p.read_bytes()).hexdigest()
            for name, p in [
                ("manifest", self.manifest_path),
                ("dockerfile", self.dockerfile_path),
                ("lock", self.lock_path),
            ]
        }


def _field_path(err: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in err.absolute_path) or "(top level)"


def _fix_for(err: jsonschema.ValidationError) -> str:
    where = _field_path(err)
    if err.validator == "required":
        missing = err.message.split("'")[1]
        return f"add '{missing}' under {where} (see `runner schema`)"
    if err.validator == "additionalProperties":
        return f"remove or rename the unknown field under {where} (see `runner schema`)"
    if err.validator == "enum":
        return f"set {where} to one of: {', '.join(map(str, err.validator_value))}"
    if err.validator == "const":
        return f"set {where} to {err.validator_value!r}"
    if err.validator == "type":
        return f"make {where} a {err.validator_value}"
    return f"correct {where} (see `runner schema`)"


def validate_manifest(data: object, source: str = "entry.yaml") -> dict[str, Any]:
    """The manifest as the schema accepts it (a mapping of its fields: the schema's top level is
    an object), or a one-line ``UserError`` naming the first bad field."""
    validator = jsonschema.Draft202012Validator(ENTRY_SCHEMA)
    errors = sorted(validator.iter_errors(data), key=lambda e: (len(e.absolute_path), e.message))
    if errors:
        err = errors[0]
        # The message quotes the value: keep it short, whatever the manifest holds.
        message = err.message if len(err.message) <= 200 else err.message[:200] + "..."
        raise UserError(
            f"{source}: field '{_field_path(err)}' is invalid: {message}", _fix_for(err)
        )
    return cast(dict[str, Any], data)  # an object, as the schema's "type" says


def _hyperparameters(section: dict | None) -> Hyperparameters | None:
    if section is None:
        return None
    return Hyperparameters(section["global_batch_size"]["default"], float(section["base_lr"]),
                           section.get("lr_scaling", "linear"))


def _check_backends_fit(data: dict, manifest: Path) -> None:
    """A native backend runs only its own framework's model (the torch backend cannot time a
    Keras model): caught here, before any build or training."""
    framework = data["framework"]["name"]
    fits = backends_for(framework)
    for backend in data["inference"].get("backends", ["torch"]):
        if backend not in fits:
            raise UserError(
                f"{manifest}: backend '{backend}' cannot run a {framework} model",
                f"choose inference.backends from: {', '.join(fits)}",
            )


def load_entry(path: str | Path) -> Entry:
    folder = Path(path).resolve()
    if not folder.is_dir():
        raise UserError(
            f"no entry folder at {path}", "pass an entry folder such as entries/mnist-cnn-cpu"
        )
    manifest = folder / "entry.yaml"
    if not manifest.exists() and not manifest.is_symlink():
        raise UserError(f"{folder} has no entry.yaml", "add a manifest (see `runner schema`)")
    data = load_untrusted_yaml(manifest)
    plain_files(folder)  # links, devices, FIFOs anywhere in the entry are refused by name
    if isinstance(data, dict) and "seed" in data:
        # The seed is the auditor's: an entry that picked its own could keep a lucky one.
        raise UserError(
            f"{manifest}: field 'seed' is not allowed: the runner chooses each run's seed",
            "remove 'seed' from entry.yaml (an auditor fixes one with `runner reproduce --seed N`)",
        )
    data = validate_manifest(data, str(manifest))
    if data["name"] != folder.name:
        raise UserError(
            f"{manifest}: field 'name' is '{data['name']}' but the folder is '{folder.name}'",
            f"set name: {folder.name}",
        )
    _check_backends_fit(data, manifest)
    inside_entry(folder, "Dockerfile", "Dockerfile")
    inside_entry(folder, data.get("lock", "requirements.lock"), "lock")
    if data.get("smoke", {}).get("lock"):
        inside_entry(folder, data["smoke"]["lock"], "smoke.lock")
    if problem := relative_problem(data["inference"]["weights"]):
        raise UserError(
            f"{manifest}: field 'inference.weights' ({data['inference']['weights'][:100]!r}) {problem}",
            "name the weights file relative to /output, e.g. model/weights.pt",
        )
    hyperparameters = _hyperparameters(data.get("hyperparameters"))
    entry = Entry(
        path=folder,
        name=data["name"],
        task=get_task(data["task"]),
        framework=data["framework"],
        model=data["model"],
        hardware_profile=data["hardware_profile"],
        base_image=data["base_image"],
        lock=data.get("lock", "requirements.lock"),
        train=TrainSpec(**data["train"]),
        inference=InferenceSpec(**data["inference"]),
        runs=data.get("runs", 1),
        nodes=data.get("nodes", 1),
        processes_per_node=data.get("processes_per_node", 1),
        claimed=data.get("claimed", {}),
        smoke=SmokeSpec(**data.get("smoke", {})),
        source=data.get("source"),
        description=data.get("description", ""),
        hyperparameters=hyperparameters,
        public_inputs=tuple(data.get("public_inputs", ())),
        switches=parse_switches(data.get("switches"), hyperparameters, str(manifest)),
        initial_weights=tuple((str(k), str(v)) for k, v in (data.get("initial_weights") or {}).items()),
        raw=data,
    )
    allowed = {i.name for i in entry.task.public_inputs}
    if unknown := [n for n in entry.public_inputs if n not in allowed]:
        raise UserError(
            f"{manifest}: field 'public_inputs' names {', '.join(map(repr, unknown))}, which task "
            f"{entry.task.id} does not declare",
            f"use only {', '.join(sorted(allowed))}" if allowed else
            f"remove 'public_inputs': task {entry.task.id} allows none (its entries start from nothing public)",
        )
    check_claim_profile(entry, str(manifest))
    return entry
