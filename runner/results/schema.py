"""JSON Schema of ``result.json`` (version 1), published by ``runner schema --result``.

Fields an auditor recomputes are typed strictly; free-form records (the backends' info,
the entry's framework) are left open.
"""

from __future__ import annotations

from typing import Any

RESULT_SCHEMA_VERSION = 1

_NUM = {"type": ["number", "null"]}
_STR = {"type": ["string", "null"]}
_SHA = {"type": "string", "pattern": "^(sha256:)?[0-9a-f]{64}$"}

_EVALUATION = {
    "type": "object",
    "required": ["index", "epoch", "start", "stop", "predictions", "count", "scores", "meets"],
    "properties": {
        "index": {"type": "integer", "minimum": 0},
        "epoch": {"type": ["integer", "null"]},
        "start": {"type": "number"},
        "stop": {"type": "number"},
        "predictions": {"type": "string"},
        "count": {"type": ["integer", "null"]},
        "scores": {"type": "object", "additionalProperties": {"type": "number"}},
        "meets": {"type": "boolean"},
        "problem": _STR,
        "checkpoint": _STR,
        "checkpoint_sha256": {"type": ["string", "null"], "pattern": "^[0-9a-f]{64}$"},
        "excluded": {"type": "boolean"},
        "probe_scores": {"type": ["object", "null"], "additionalProperties": {"type": "number"}},
        "probe_gap": _NUM,
        "probe_items": {"type": "integer", "minimum": 1,
                        "description": "the probe predicted this many items, drawn by probe_seed (absent: all)"},
        "probe_seed": {"type": "integer"},
        "gpu_tail_seconds": {"type": "number", "minimum": 0,
                             "description": "pause -> the run's GPUs idle: counted as training (class 2c)"},
    },
}

_LOADGEN_SCENARIO: dict[str, Any] = {
    "type": "object",
    "properties": {
        "valid": {"type": "boolean"},
        "problem": _STR,
        "window_seconds": _NUM,
    },
}

# LoadGen's own figures beside the DAWNBench per-item ones (MLPerf users ask for them).
_LOADGEN = {
    "type": ["object", "null"],
    "properties": {
        "version": _STR,
        "settings": {"type": ["object", "null"]},
        "error": _STR,
        "single_stream": {
            **_LOADGEN_SCENARIO,
            "properties": {
                **_LOADGEN_SCENARIO["properties"],
                **{k: _NUM for k in ("p50_ms", "p90_ms", "p99_ms", "mean_ms", "max_ms", "early_stopping_p90_ms")},
                "query_count": {"type": ["integer", "null"]},
            },
        },
        "offline": {
            **_LOADGEN_SCENARIO,
            "properties": {**_LOADGEN_SCENARIO["properties"], "samples_per_s": _NUM,
                           "sample_count": {"type": ["integer", "null"]}},
        },
    },
}

_BACKEND = {
    "type": "object",
    "required": ["passed_gate", "gate_reason", "scores", "count", "latency_ms"],
    "properties": {
        "passed_gate": {"type": "boolean"},
        "gate_reason": _STR,
        "scores": {"type": ["object", "null"]},
        "count": {"type": ["integer", "null"]},
        "latency_ms": {
            "type": ["object", "null"],
            "properties": {k: {"type": "number"} for k in ("mean", "p50", "p90", "p99", "max")},
        },
        "throughput_per_s": _NUM,
        "cost_per_10k_usd": _NUM,
        "window_seconds": _NUM,
        "info": {"type": ["object", "null"]},
        "loadgen": _LOADGEN,
        "energy": {
            "type": ["object", "null"],
            "description": "the timed pass's energy (gpu: NVML, cpu: RAPL) and joules per 10,000 items",
            "properties": {"joules": _NUM, "joules_per_10k_items": _NUM},
        },
    },
}

RESULT_SCHEMA: dict = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://runner.dev/schemas/result/v1.json",
    "title": "runner result",
    "type": "object",
    "required": [
        "schema_version", "run_id", "toolkit", "entry", "task", "seed", "smoke", "status",
        "incomplete_reason", "conforming", "nonconforming_reasons", "image", "data",
        "training", "cost", "inference", "hardware",
    ],
    "properties": {
        "schema_version": {"const": RESULT_SCHEMA_VERSION},
        "run_id": {"type": "string", "pattern": r"^\d{8}T\d{6}Z-s\d+-[0-9a-f]{6}$"},
        "toolkit": {
            "type": ["object", "null"],  # null (like image, data, cost, hardware) only in a placeholder
            "required": ["name", "version", "harness_sha256"],
            "properties": {"harness_sha256": _SHA},
        },
        "entry": {
            "type": "object",
            "required": ["name", "model", "framework", "digests"],
            "properties": {
                "digests": {
                    "type": "object",
                    "required": ["manifest", "dockerfile", "lock"],
                    "additionalProperties": _SHA,
                },
            },
        },
        "task": {
            "type": "object",
            "required": ["id", "metric", "threshold", "eval_size"],
            "properties": {
                "metric": {"enum": ["top1", "top5", "f1"]},
                "threshold": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
                "eval_size": {"type": "integer", "minimum": 1},
            },
        },
        "seed": {"type": "integer"},
        "smoke": {"type": "boolean"},
        "status": {"enum": ["running", "complete", "incomplete", "invalid"]},
        "incomplete_reason": _STR,
        "conforming": {"type": "boolean"},
        "nonconforming_reasons": {"type": "array", "items": {"type": "string"}},
        "image": {"type": ["object", "null"], "required": ["id", "tag", "base_id"]},
        "probe": {
            "type": ["object", "null"],
            "properties": {"shift_pixels": {"type": "array", "items": {"type": "integer"}},
                           "distractor_sentence": {"type": "string"}, "limit": {"type": "number"},
                           "items": {"type": "integer", "description": "shifted images each probe predicts"}},
        },
        "image_audit": {"type": ["object", "null"]},
        "hyperparameters": {
            "type": "object",
            "description": "values the runner passed for the entry's declared hyperparameters",
            "additionalProperties": {"type": "string"},
        },
        "data": {"type": ["object", "null"], "required": ["task", "digest"],
                 "properties": {"train_tree_digest": {"type": ["string", "null"],
                                                      "description": "a training tree's content digest (ImageNet)"}}},
        "training": {
            "type": ["object", "null"],
            "properties": {
                "reached": {"type": "boolean"},
                "tta_seconds": _NUM,
                "tta_hours": _NUM,
                "tta_resolution_seconds": {**_NUM, "description": "the training time between the crossing "
                                           "evaluation and the one before it (from the clock's start for the "
                                           "first): TTA is known to within this step"},
                "launch_seconds": _NUM,
                "wall_clock_start_unix_ms": {"type": ["integer", "null"]},
                "train_samples": {"type": ["integer", "null"]},
                "launch_stamp": {"enum": ["launcher", "container-start", None]},
                "excluded_eval_seconds": _NUM,
                "notes": {"type": "array", "items": {"type": "string"}},
                "final_model": {"type": ["object", "null"]},
                "wall_seconds": {"type": "number"},
                "crossing": {"type": ["integer", "null"]},
                "evaluations": {"type": "array", "items": _EVALUATION},
                "model_origin": {
                    "type": ["object", "null"],
                    "description": "class 4 checks of the crossing checkpoint and the final model: "
                    "provenance (tensors not in the checkpoint), sensitivity (score with the "
                    "checkpoint's tensors permuted), the builder's time per evaluation",
                    "properties": {
                        "provenance": {"type": "object"},
                        "sensitivity": {"type": "array", "items": {"type": "object"}},
                        "builder_seconds": {"type": "object"},
                        "predict_seconds": {"type": "object"},
                    },
                },
                "cross_seed": {
                    "type": ["object", "null"],
                    "description": "the runs of one reproduction compared across seeds at their crossing "
                    "checkpoints: mistake overlap and aligned-weights correlation per pair against the task's "
                    "limits; checked is false (why_not says why) for a single run, fewer than 3 runs or the "
                    "auditor's seeds",
                    "properties": {"checked": {"type": "boolean"}, "runs": {"type": "integer"},
                                   "pairs": {"type": "array", "items": {"type": "object"}}},
                },
                "evidence": {
                    "type": ["object", "null"],
                    "description": "evidence of training (class 4f): the training containers' CPU seconds to "
                    "the crossing against one forward pass of the crossing model over the training set",
                    "properties": {"cpu_seconds": _NUM, "forward_pass_cpu_seconds": _NUM, "ratio": _NUM,
                                   "floor_cpu_seconds": _NUM, "fraction": {"type": "number"}},
                },
            },
        },
        "cost": {
            "type": ["object", "null"],
            "required": ["training_usd", "usd_per_hour", "profile", "price_date", "price_source"],
            "properties": {"training_usd": _NUM, "usd_per_hour": {"type": "number"}},
        },
        "inference": {"type": "object", "additionalProperties": _BACKEND},
        "hardware": {
            "type": ["object", "null"],
            "required": ["profile", "matched", "mismatches", "allowed_mismatch"],
        },
        "energy": {
            "type": ["object", "null"],
            "description": "energy of the training window (frozen windows excluded) and joules-to-accuracy; "
            "per source (gpu: NVML, cpu: RAPL) the joules and method, or why it was not measured",
            "properties": {
                "training": {
                    "type": "object",
                    "properties": {"window": {"type": "object"}, "joules_to_accuracy": _NUM},
                },
            },
        },
        "gpu_sharing": {
            "type": ["object", "null"],
            "description": "a run with GPUs: other processes on them, clock throttle reasons, MIG mode",
            "properties": {"samples": {"type": "integer"}, "shared_fraction": {"type": "number"},
                           "mig_enabled": {"type": ["boolean", "null"]}},
        },
        "public_inputs": {
            "type": ["array", "null"],
            "description": "the declared public inputs mounted read-only at /data/public/<name> "
            "(runner.data.public_inputs): each file's sha256 and size; synthetic in smoke runs",
            "items": {"type": "object", "required": ["name", "synthetic", "files"],
                      "properties": {"name": {"type": "string"}, "synthetic": {"type": "boolean"},
                                     "files": {"type": "object", "additionalProperties": {
                                         "type": "object", "required": ["sha256", "bytes"],
                                         "properties": {"sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                                                        "bytes": {"type": "integer", "minimum": 0}}}}}},
        },
        "plan": {
            "type": ["object", "null"],
            "description": "the run's plan (runner.plan.RunPlan) saved beside it: the file and its sha256; "
            "`runner verify` checks that the plan describes this result",
            "required": ["file", "sha256"],
            "properties": {"file": {"const": "plan.json"}, "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"}},
        },
        "variant": {
            "type": ["object", "null"],
            "description": "a study's variant of the entry (runner study lesion, factors, scaling): the declared "
            "switches it turned off and another placement than the manifest's; not the entry's recipe, so never "
            "a claim or a leaderboard reproduction. Absent for the entry as declared",
            "additionalProperties": False,
            "properties": {
                "switches_off": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                "nodes": {"type": "integer", "minimum": 1},
                "processes_per_node": {"type": "integer", "minimum": 1},
            },
        },
        "initial_weights": {
            "type": ["object", "null"],
            "description": "the initial weights the runner drew for the run from its seed (run contract, 'Initial "
            "weights'): init/init.json and its sha256, the values' digest, the tensors not drawn at random (public "
            "inputs, computed from data); the scored models' descent from it is training.model_origin.descent. Absent "
            "in results from before the draw",
            "required": ["record", "record_sha256", "values_sha256"],
            "properties": {
                "record": {"const": "init/init.json"},
                "record_sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                "values_sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                "tensors": {"type": "integer", "minimum": 0},
                "drawn_elements": {"type": "integer", "minimum": 0},
                "undrawn": {"type": "array"},
            },
        },
        "ledger": {
            "type": ["object", "null"],
            "description": "where the run stands in its signing key's ledger (runner.keys.ledger), recorded just "
            "before it was signed: the key, the index of its line, the hash of the line before (the head it "
            "followed) and how many runs of this entry (smoke runs apart) the key had made, this one included. "
            "`runner verify` holds it to the signer's key, to other bundles of the key and to a published ledger "
            "(--ledger). Absent for an unsigned run or one signed before the ledger",
            "required": ["key_id", "index", "previous", "entry_runs"],
            "additionalProperties": False,
            "properties": {
                "key_id": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                "index": {"type": "integer", "minimum": 0},
                "previous": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                "entry_runs": {"type": "integer", "minimum": 1},
            },
        },
        "rules": {
            "type": ["object", "null"],
            "description": "the version of the task's rules the run was made under (runner/tasks/<task>/rules/"
            "<version>.toml: threshold and limits); `runner verify` judges the result by it and says what today's "
            "rules would say when they differ. Absent in results from before rules had versions: version 1",
            "required": ["task", "version"],
            "additionalProperties": False,
            "properties": {"task": {"type": "string"}, "version": {"type": "string", "pattern": "^[0-9]+$"}},
        },
        "isolation": {
            "type": ["object", "null"],
            "description": "an engine that could not isolate the run (the host engine: the entry ran with the "
            "host's Python and packages, not its image): the engine and why, in one line. Such a run never counts; "
            "`runner verify` holds this record to the fingerprint's engine. Absent when the entry's own image ran, "
            "locked down",
            "required": ["isolated", "engine", "why_not"],
            "additionalProperties": False,
            "properties": {"isolated": {"type": "boolean"}, "engine": {"type": "string"},
                           "why_not": {"type": "string"}},
        },
        "timings": {
            "type": ["object", "null"],
            "description": "where the run's wall time went (runner.timings): phases in the order they ran, "
            "each with its seconds and parts; signing follows result.json and is not in it",
            "required": ["phases", "total_seconds"],
            "properties": {
                "phases": {"type": "array", "items": {
                    "type": "object", "required": ["name", "seconds"],
                    "properties": {"name": {"type": "string"}, "seconds": {"type": "number", "minimum": 0},
                                   "parts": {"type": "object"}}}},
                "total_seconds": {"type": "number", "minimum": 0},
            },
        },
        "slurm": {  # only in runs of `runner reproduce --slurm`, written where they are gathered
            "type": ["object", "null"],
            "required": ["job_id", "array_job_id", "array_index", "state"],
            "properties": {
                "job_id": {"type": "string"}, "array_job_id": {"type": "string"},
                "array_index": {"type": "integer", "minimum": 0}, "state": {"type": "string"},
                "node": _STR, "log": _STR,
            },
        },
    },
}
