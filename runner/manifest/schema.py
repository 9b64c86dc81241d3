"""JSON Schema of ``entry.yaml``, published by ``runner schema``.

Version 1. A change that makes an old manifest invalid bumps ``schema_version``.
"""

from __future__ import annotations

from runner.frameworks import FRAMEWORKS as FRAMEWORK_TABLE
from runner.harness.backends import REGISTRY as BACKEND_TABLE
from runner.manifest.switches import SWITCHES_SCHEMA
from runner.tasks import TASKS

# The roles of runner/initial_weights.py ROLES (the manifest sits below the run stage: the
# names are repeated here and a test holds them equal).
INIT_ROLES = ("fan_in_uniform", "fan_in_normal", "fan_out_normal", "glorot_uniform", "glorot_normal", "normal",
              "zeros", "ones", "public", "data")

SCHEMA_VERSION = 1
BACKENDS = list(BACKEND_TABLE)  # the harness' backend table is the one list
FRAMEWORKS = list(FRAMEWORK_TABLE)  # the registry: only a framework the harness has a loader for

_NAME = {"type": "string", "pattern": "^[a-z0-9][a-z0-9._-]*$", "maxLength": 64}
_COMMAND = {"type": "array", "items": {"type": "string"}, "minItems": 1}

ENTRY_SCHEMA: dict = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://runner.dev/schemas/entry/v1.json",
    "title": "runner entry manifest",
    "type": "object",
    "additionalProperties": False,
    "required": [
        "schema_version", "name", "task", "framework", "model",
        "hardware_profile", "base_image", "train", "inference",
    ],
    "properties": {
        "schema_version": {"const": SCHEMA_VERSION, "description": "manifest schema version"},
        "name": {**_NAME, "description": "entry name; the folder's name"},
        "description": {"type": "string"},
        "task": {"enum": sorted(TASKS), "description": "the benchmark task"},
        "framework": {
            "type": "object",
            "additionalProperties": False,
            "required": ["name", "version"],
            "properties": {"name": {"enum": FRAMEWORKS}, "version": {"type": "string"}},
        },
        "model": {"type": "string", "minLength": 1, "description": "model architecture"},
        "hardware_profile": {**_NAME, "description": "id of a file in hardware_profiles/"},
        "base_image": {**_NAME, "description": "name of a recipe folder in images/"},
        "lock": {
            "type": "string",
            "default": "requirements.lock",
            "description": "hash-pinned lock of Python deps (pip --require-hashes format)",
        },
        "train": {
            "type": "object",
            "additionalProperties": False,
            "required": ["command"],
            "properties": {
                "command": {**_COMMAND, "description": "argv run in /entry"},
                "timeout_minutes": {"type": "number", "exclusiveMinimum": 0, "maximum": 10080, "default": 60},
            },
        },
        "smoke": {
            "type": "object",
            "additionalProperties": False,
            "description": "what a --smoke run (CPU, synthetic data, never conforming) uses instead",
            "properties": {
                "command": {**_COMMAND, "description": "argv for smoke runs"},
                "base_image": {**_NAME, "description": "a base image this host can build"},
                "lock": {"type": "string", "description": "a lock this host can resolve"},
            },
        },
        "inference": {
            "type": "object",
            "additionalProperties": False,
            "required": ["builder", "weights"],
            "properties": {
                "builder": {
                    "type": "string",
                    "pattern": "^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*$",
                    "description": "module:function in /entry that returns the untrained model",
                },
                "weights": {"type": "string", "description": "state_dict path under /output"},
                "backends": {
                    "type": "array",
                    "items": {"enum": BACKENDS},
                    "minItems": 1,
                    "uniqueItems": True,
                    "default": ["torch"],
                },
                "warmup": {"type": "integer", "minimum": 0, "default": 100},
                "threads": {"type": "integer", "minimum": 1, "default": 1},
                "opset": {"type": "integer", "minimum": 7, "default": 17},
                "fp16": {"type": "boolean", "default": False},
                "builder_seconds": {
                    "type": "number", "exclusiveMinimum": 0, "maximum": 120, "default": 30,
                    "description": "the most seconds the evaluator may spend in the builder and loading a "
                    "checkpoint, per evaluation (excluded from the clock, so bounded; cap 120)",
                },
            },
        },
        "public_inputs": {
            "type": "array", "uniqueItems": True,
            "items": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]*$", "maxLength": 64},
            "description": "public artifacts the entry starts from, among those its task declares "
            "(squad-v1.1: glove.840B.300d, glove.6B); each is imported once by `runner data import NAME PATH` "
            "and mounted read-only at /data/public/<name>/",
        },
        "hyperparameters": {
            "type": "object",
            "additionalProperties": False,
            "required": ["global_batch_size", "base_lr"],
            "description": "what `runner study batch-size` may vary; the runner passes its choice as "
            "RUNNER_HP_GLOBAL_BATCH_SIZE and RUNNER_HP_LR (names fixed by the run contract)",
            "properties": {
                "global_batch_size": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["default"],
                    "properties": {"default": {"type": "integer", "minimum": 1}},
                },
                "base_lr": {"type": "number", "exclusiveMinimum": 0,
                            "description": "the learning rate at the default batch size"},
                "lr_scaling": {"enum": ["linear", "sqrt", "none"], "default": "linear",
                               "description": "how the learning rate follows the batch size"},
            },
        },
        "switches": SWITCHES_SCHEMA,
        "initial_weights": {
            "type": "object", "maxProperties": 64,
            "propertyNames": {"maxLength": 256},
            "additionalProperties": {"enum": list(INIT_ROLES)},
            "description": "how the runner draws the initial value of the tensors a glob names (run contract, "
            "'Initial weights'): a role from the runner's vocabulary; every other tensor takes its framework's "
            "default. public: the task's declared public input; data: computed from the training data in the run",
        },
        "runs": {"type": "integer", "minimum": 1, "default": 1},
        "nodes": {
            "type": "integer", "minimum": 1, "default": 1,
            "description": "machines one run spans (more than 1 needs a cluster: docs/cluster.md)",
        },
        "processes_per_node": {
            "type": "integer", "minimum": 1, "default": 1,
            "description": "training processes per machine, one container each; they get "
            "torchrun's MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK",
        },
        "claimed": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "tta_seconds": {"type": "number", "exclusiveMinimum": 0},
                "latency_ms": {"type": "number", "exclusiveMinimum": 0},
                # Where the claim was measured and its evidence (runner.claims): a profile that
                # pins the speed class (default: hardware_profile), the runs' count and
                # coefficient of variation, and their signed bundles archived in the repository.
                "profile": {"type": "string", "pattern": "^[a-z0-9][a-z0-9._-]*$", "maxLength": 64},
                "runs": {"type": "integer", "minimum": 1},
                "cv": {"type": "number", "minimum": 0},
                "bundles": {"type": "array", "minItems": 1,
                            "items": {"type": "string", "pattern": "^results/archive/([A-Za-z0-9_][A-Za-z0-9._-]*/)*[A-Za-z0-9_][A-Za-z0-9._-]*\\.tar\\.gz$"}},
                "score": {"type": "number"},
                # The same recipe measured on hosts of other speed classes, each with its own
                # profile and evidence: a host is compared with the claim of the profile it meets.
                "other_profiles": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["profile", "tta_seconds", "bundles"],
                        "properties": {
                            "profile": {"type": "string", "pattern": "^[a-z0-9][a-z0-9._-]*$", "maxLength": 64},
                            "tta_seconds": {"type": "number", "exclusiveMinimum": 0},
                            "runs": {"type": "integer", "minimum": 1},
                            "cv": {"type": "number", "minimum": 0},
                            "bundles": {"type": "array", "minItems": 1,
                                        "items": {"type": "string", "pattern": "^results/archive/([A-Za-z0-9_][A-Za-z0-9._-]*/)*[A-Za-z0-9_][A-Za-z0-9._-]*\\.tar\\.gz$"}},
                        },
                    },
                },
                # The DAWNBench submissions this entry reproduces (their files' stems, as
                # `runner import dawnbench` names claims: training and/or inference);
                # the leaderboard pairs them with this entry's runs.
                "dawnbench": {
                    "oneOf": [
                        {"type": "string", "pattern": "^[^/]+$"},
                        {"type": "array", "items": {"type": "string", "pattern": "^[^/]+$"}, "minItems": 1},
                    ],
                },
            },
        },
        "source": {"type": "string", "format": "uri"},
    },
}
