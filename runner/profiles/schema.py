"""JSON Schema of ``hardware_profiles/<id>.yaml``.

A profile says what hardware an entry's claim was made on: rules a host must meet
(GPU and CPU), the container limits a CPU profile grants, and the on-demand price that
turns seconds into dollars, with where and when that price was read.
"""

from __future__ import annotations

_POSITIVE = {"type": "number", "exclusiveMinimum": 0}
_COUNT = {"type": "integer", "minimum": 1}

PROFILE_SCHEMA: dict = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://runner.dev/schemas/hardware-profile/v1.json",
    "title": "runner hardware profile",
    "type": "object",
    "additionalProperties": False,
    "required": ["id", "description", "price"],
    "anyOf": [{"required": ["gpu"]}, {"required": ["container_limits"]}],
    "properties": {
        "id": {"type": "string", "pattern": "^[a-z0-9][a-z0-9._-]*$", "maxLength": 64},
        "description": {"type": "string", "minLength": 1},
        "cloud": {"type": "string", "description": "provider, e.g. aws; absent for on-premises"},
        "instance_type": {"type": "string"},
        "nodes": {**_COUNT, "default": 1,
                  "description": "machines of this hardware one run spans; the rules and the price are per node"},
        "gpu": {
            "type": "object",
            "additionalProperties": False,
            "required": ["name_pattern", "count", "memory_gib"],
            "properties": {
                "name_pattern": {"type": "string", "description": "regex searched in the NVML name, case-insensitive"},
                "count": _COUNT,
                "memory_gib": {**_POSITIVE, "description": "per GPU; a host must be within 5%"},
                "compute_capability": {"type": "string", "pattern": r"^\d+\.\d+$"},
                "allow_mig": {"type": "boolean", "default": False},
                "min_driver": {"type": "string", "pattern": r"^\d+(\.\d+)*$"},
            },
        },
        "cpu": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "architecture": {"type": "string", "description": "e.g. x86_64, aarch64"},
                "vendor": {"type": "string", "description": "vendor_id, e.g. GenuineIntel"},
                "model_pattern": {"type": "string", "description": "regex searched in the model name"},
                "min_logical_cores": _COUNT,
                "max_logical_cores": _COUNT,
                "required_flags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                "families": {"type": "array", "items": {"type": "integer", "minimum": 0}, "uniqueItems": True,
                             "minItems": 1, "description": "/proc/cpuinfo 'cpu family' values allowed (AMD Zen 4: 25)"},
                "min_memory_gib": {**_POSITIVE, "description": "compared with the kernel's MemTotal"},
            },
        },
        "container_limits": {
            "type": "object",
            "additionalProperties": False,
            "required": ["cpus", "memory"],
            "properties": {
                "cpus": _POSITIVE,
                "memory": {"type": "string", "pattern": r"^\d+(\.\d+)?[kmgKMG]?$", "description": "docker syntax: 4g, 512m"},
            },
        },
        "peak": {
            "type": "object",
            "additionalProperties": False,
            "required": ["tflops", "memory_bandwidth_gbs", "source"],
            "description": "the hardware's peak, for rooflines: the whole profile (every GPU, or the "
            "container's CPU cores), with where each figure comes from",
            "properties": {
                "tflops": {
                    "type": "object",
                    "minProperties": 1,
                    "propertyNames": {"enum": ["fp64", "fp32", "tf32", "fp16", "bf16", "int8"]},
                    "additionalProperties": _POSITIVE,
                    "description": "peak TFLOP/s (dense) per precision",
                },
                "memory_bandwidth_gbs": {**_POSITIVE, "description": "peak memory bandwidth, GB/s"},
                "source": {"type": "string", "minLength": 1},
            },
        },
        "price": {
            "type": "object",
            "additionalProperties": False,
            "required": ["usd_per_hour", "region", "date", "source"],
            "properties": {
                "usd_per_hour": {"type": "number", "minimum": 0},
                "region": {"type": "string"},
                "date": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$", "description": "when the price was read"},
                "source": {"type": "string", "minLength": 1},
                "note": {"type": "string"},
            },
        },
    },
}
