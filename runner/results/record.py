"""``result.json`` as a type: the result of one run and its sections.

``reproduce`` builds it stage by stage and writes it; ``verify``, the bundle's claim, the
CLI and the leaderboard read it back through ``Result.read`` (``Result.from_dict`` for a
bundle's untrusted copy, which raises ``ValueError`` on a malformed one). The JSON Schema
(``runner.results.schema``) stays the public contract; a test checks the two agree.
Per-backend inference records are ``runner.results.inference.BackendRun``, which keeps the
fields a backend adds of its own.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from runner.results.folder import write_json
from runner.results.inference import BackendRun, read_section
from runner.safe_read import Unreadable, read_json, visible

RESULT_FILE = "result.json"


class UnreadableResult(Unreadable, ValueError):
    """A result.json that is not a result (``Result.read``): a ``UserError`` naming the file and
    why, and a ``ValueError`` for the readers that catch a malformed result as one."""


class MissingResult(Unreadable, FileNotFoundError):
    """A run folder without a result.json (``Result.read``)."""


@dataclass
class Toolkit:
    name: str
    version: str
    harness_sha256: str


@dataclass
class EntryInfo:
    name: str
    model: str
    framework: dict
    source: str | None
    claimed: dict
    digests: dict[str, str]


@dataclass
class TaskInfo:
    id: str
    metric: str
    threshold: float
    eval_size: int


@dataclass
class ImageInfo:
    id: str
    tag: str
    base_id: str
    base_tag: str | None = None


@dataclass
class DataInfo:
    task: str
    digest: str
    source: str | None = None
    # A training set kept as a tree (ImageNet): sha256 over its files' contents, as imported.
    train_tree_digest: str | None = None


@dataclass
class Training:
    """The training phase as the runner measured it (see ``runner.score.summary``)."""

    wall_seconds: float
    notes: list[str] = field(default_factory=list)
    wall_clock_start_unix_ms: int | None = None  # the host's unix time at t = 0 (MLPerf logs)
    train_samples: int | None = None  # items in the staged training set
    reached: bool = False
    tta_seconds: float | None = None
    tta_hours: float | None = None
    # the training time between the crossing evaluation and the one before it (runner.score.tta);
    # None when not reached, and in results from before it was recorded
    tta_resolution_seconds: float | None = None
    launch_seconds: float | None = None
    launch_stamp: str | None = None
    excluded_eval_seconds: float | None = None
    crossing: int | None = None
    evaluations: list[dict] = field(default_factory=list)  # ScoredEvaluation.to_dict() each
    final_model: dict | None = None
    model_origin: dict | None = None  # runner.score.model_origin: provenance, sensitivity, builder time
    # runner.score.across_runs: the runs of one reproduction compared across seeds (mistakes,
    # aligned weights), or why they could not be (a single run); None before these checks
    cross_seed: dict | None = None
    evidence: dict | None = None  # runner.score.training_evidence: the work to the crossing against a forward pass


@dataclass
class Cost:
    training_usd: float | None
    usd_per_hour: float
    profile: str
    price_date: str
    price_region: str
    price_source: str


@dataclass
class Result:
    schema_version: int
    run_id: str
    toolkit: Toolkit | None  # None (like image, data, cost, hardware) only in a placeholder
    entry: EntryInfo
    task: TaskInfo
    seed: int
    smoke: bool
    status: str  # running, complete, incomplete, invalid
    incomplete_reason: str | None
    conforming: bool
    nonconforming_reasons: list[str]
    image: ImageInfo | None  # for a run that never started (a Slurm task that died)
    data: DataInfo | None
    cost: Cost | None
    hardware: dict | None
    training: Training | None = None
    inference: dict[str, BackendRun] = field(default_factory=dict)  # by backend name
    image_audit: dict | None = None
    probe: dict | None = None
    slurm: dict | None = None  # the Slurm job of a run gathered by `runner reproduce --slurm`
    # Values the runner passed for the entry's declared hyperparameters (a study's choice),
    # by name (``global_batch_size``, ``lr``); empty when the entry ran with its defaults.
    hyperparameters: dict[str, str] = field(default_factory=dict)
    # Joules of the training window (frozen time excluded) and joules-to-accuracy, each source's
    # method or why it was not measured (runner.energy); per-backend inference energy is in
    # each inference record's ``energy``.
    energy: dict | None = None
    gpu_sharing: dict | None = None  # a run with GPUs: were they its alone (runner.run.gpu_sharing)
    # Where the run's wall time went, phase by phase (runner.timings); not a score.
    timings: dict | None = None
    # The declared public inputs the run had mounted (runner.data.public_inputs), file by file.
    public_inputs: list[dict] | None = None
    # The plan the run was started from (runner.plan, ``plan.json``): the file and its sha256.
    plan: dict | None = None
    # A study's variant of the entry (runner.plan.RunPlan.variant): the switches it turned off
    # (``switches_off``), another placement (``nodes``, ``processes_per_node``). Not the entry's
    # recipe: the leaderboard and the claims leave it out. None for the entry as declared.
    variant: dict | None = None
    # The initial weights the runner drew for the run (runner.run.init_weights): the record
    # (``init/init.json``) and its sha256, the values' digest, the tensors not drawn at random
    # (whether the scored models descend from them: ``training.model_origin["descent"]``).
    initial_weights: dict | None = None
    # Where the run stands in its signing key's ledger (runner.keys.ledger), recorded just
    # before it was signed: the key, the line's index, the head before it and how many runs
    # of the entry (smoke runs apart) the key had made, this one included. None: unsigned, or
    # signed before the ledger.
    ledger: dict | None = None
    # The version of the task's rules the run was made under (runner.tasks.rules): ``task``,
    # ``version``. None: made before rules had versions, judged by version 1.
    rules: dict | None = None
    # An engine that could not isolate the run (the host engine: no image, the host's packages):
    # ``isolated`` false, the ``engine`` and ``why_not`` in one line. Such a run never counts
    # (runner.verify.verdict). None: the entry's own image, locked down by its engine.
    isolation: dict | None = None

    # -- a run's verdicts ---------------------------------------------------------------
    def not_conforming(self, reason: str) -> None:
        if reason not in self.nonconforming_reasons:  # a check run again (re-inference) says it once
            self.nonconforming_reasons.append(reason)
        self.conforming = False

    def ended(self, status: str, reason: str | None) -> None:
        self.status, self.incomplete_reason = status, reason

    @property
    def rules_version(self) -> str:
        """The version of the task's rules the run was made under ("1" when it records none)."""
        version = self.rules.get("version") if isinstance(self.rules, dict) else None
        return version if isinstance(version, str) else "1"

    @property
    def tta_seconds(self) -> float | None:
        """The TTA when the threshold was reached, else None."""
        return self.training.tta_seconds if self.training and self.training.reached else None

    # -- JSON -----------------------------------------------------------------------------
    def to_dict(self) -> dict:
        data = asdict(self)
        data["inference"] = {name: run.to_dict() for name, run in self.inference.items()}
        for name in _OPTIONAL:  # results from before these sections read back as they were written
            if data[name] is None:
                del data[name]
        if data.get("data") and data["data"].get("train_tree_digest") is None:
            del data["data"]["train_tree_digest"]  # only a task with a training tree has one
        return data

    @classmethod
    def from_dict(cls, data: object) -> Result:
        if not isinstance(data, dict):
            raise ValueError(f"result.json holds a JSON {_json_type(data)}, not an object")
        try:
            values = {f.name: data[f.name] for f in fields(cls) if f.name in data}
            _check_types(cls, values, "")
            for name, section in _SECTIONS.items():
                if values.get(name) is not None:
                    if not isinstance(values[name], dict):
                        raise ValueError(f"result.json's {name} is {_a(_json_type(values[name]))}, not an object")
                    _check_types(section, values[name], f"{name}.")
                    values[name] = section(**values[name])
            if "inference" in values:
                for name, record in (values["inference"] or {}).items():
                    if isinstance(record, dict):
                        _check_types(BackendRun, record, f"inference.{name}.")
                values["inference"] = read_section(values["inference"])
            return cls(**values)
        except TypeError as err:  # a missing or unknown field
            raise ValueError(f"result.json does not have the result's fields ({err})") from None

    def write(self, folder: Path) -> None:
        write_json(Path(folder) / RESULT_FILE, self.to_dict())

    def write_last(self, folder: Path, clock) -> None:
        """A run's last write, with its timings (``clock``: the run's ``runner.timings.Timings``)
        ending in the phase "writing": the time to render the record for this one write (the
        file's own write, a few milliseconds, cannot be timed inside it)."""
        started = time.monotonic()
        document = self.to_dict()
        clock.add("writing", time.monotonic() - started)
        self.timings = document["timings"] = clock.to_dict()
        write_json(Path(folder) / RESULT_FILE, document)

    @classmethod
    def read(cls, folder: Path) -> Result:
        """``folder/result.json`` read safely (``runner.safe_read``, kind "result"): a FIFO, a
        huge, deep, truncated or ill-typed file is an ``UnreadableResult`` naming it and why
        (``MissingResult`` when there is none), never a hang or a traceback."""
        path = Path(folder) / RESULT_FILE
        try:
            data = read_json(path, "result")
        except Unreadable as err:
            if err.why == "does not exist":
                raise MissingResult(path, err.why, "pass a run folder written by `runner reproduce`") from None
            raise UnreadableResult(path, err.why, "pass a run folder written by `runner reproduce`") from None
        try:
            return cls.from_dict(data)
        except ValueError as err:
            why = visible(str(err).removeprefix("result.json ").removeprefix("result.json's "))  # names from the data
            raise UnreadableResult(path, why, "pass a run folder written by `runner reproduce`") from None


def _json_type(value: object) -> str:
    """A value's type as JSON names it."""
    if value is None:
        return "null"
    for kind, name in ((bool, "boolean"), (str, "string"), (int, "number"), (float, "number"), (dict, "object"),
                       (list, "array")):
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _a(noun: str) -> str:
    return f"an {noun}" if noun[:1] in "aeiou" else f"a {noun}"


def _fits(value: object, annotation: str) -> bool:
    """Whether a value read from JSON has the type of a field annotated ``annotation`` (the
    plain ones a result uses; any other annotation is not checked)."""
    options = [a.strip() for a in annotation.split("|")]
    if "None" in options and value is None:
        return True
    for option in options:
        base = option.split("[", 1)[0]
        if base == "str" and isinstance(value, str):
            return True
        if base == "bool" and isinstance(value, bool):
            return True
        if base == "int" and isinstance(value, int) and not isinstance(value, bool):
            return True
        if base == "float" and isinstance(value, (int, float)) and not isinstance(value, bool):
            return True
        if base == "dict" and isinstance(value, dict):
            return option != "dict[str, float]" or all(
                x is None or (isinstance(x, (int, float)) and not isinstance(x, bool)) for x in value.values())
        if base == "list" and isinstance(value, list):
            return option != "list[str]" or all(isinstance(x, str) for x in value)
        if base not in ("str", "bool", "int", "float", "dict", "list", "None"):
            return True  # a section (checked on its own) or a type not checked here
    return False


def _check_types(cls: type, values: dict, prefix: str) -> None:
    """``ValueError`` naming the first field of ``values`` whose JSON type is not its field's:
    a result with ``"training": 5`` or ``"status": []`` is unreadable, never a TypeError later."""
    for f in fields(cls):
        if f.name in values and not _fits(values[f.name], str(f.type)):
            raise ValueError(f"result.json's {prefix}{f.name} is {_a(_json_type(values[f.name]))}, not {f.type}")


_OPTIONAL = ("energy", "gpu_sharing", "timings", "public_inputs", "plan", "variant", "initial_weights", "ledger",
             "rules", "isolation")
_SECTIONS = {
    "toolkit": Toolkit, "entry": EntryInfo, "task": TaskInfo, "image": ImageInfo, "data": DataInfo,
    "cost": Cost, "training": Training,
}
