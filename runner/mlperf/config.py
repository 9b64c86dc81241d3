"""The user's MLPerf submission settings: what the host cannot tell about itself.

Stored as YAML at ``paths.config_path()`` under the ``mlperf`` section and set with
``runner config set mlperf.<key> VALUE``. Every key is a string; a few have a fixed set
of values (MLPerf's own). Nothing here is guessed: a value the export needs and the user
has not set is a one-line error naming the key and the command that sets it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from runner import paths
from runner.errors import UserError

SECTION = "mlperf"

# key -> (what it is, allowed values or None)
KEYS: dict[str, tuple[str, tuple[str, ...] | None]] = {
    "org": ("submitting organisation (submission_org, submitter)", None),
    "platform": ("platform name (submission_platform, the system's folder and system_name)", None),
    "division": ("MLPerf division", ("open", "closed")),
    "status": ("availability (training log submission_status)", ("cloud", "onprem", "preview", "research")),
    "system_type": ("inference system type", ("datacenter", "edge", "datacenter,edge")),
    "host_storage_type": ("host storage, e.g. 'NVMe SSD'", None),
    "host_storage_capacity": ("host storage capacity, e.g. '1x 500 GB'", None),
    "host_networking": ("host networking, e.g. '1x 25 GbE' or 'N/A'", None),
    "host_networking_topology": ("host networking topology, e.g. 'N/A' for one node", None),
    "host_network_card_count": ("host network cards, e.g. '1'", None),
    "host_memory_configuration": ("memory layout, e.g. '8x 16 GB DDR5'", None),
    "host_processor_interconnect": ("processor interconnect, e.g. 'N/A' for one socket", None),
    "cooling": ("cooling, e.g. 'air'", None),
    "framework": ("framework string when the fingerprint has no image probe, e.g. 'PyTorch 2.13.0'", None),
    "accelerator_memory_configuration": ("accelerator memory, e.g. 'HBM2'", None),
    "accelerator_interconnect_topology": ("accelerator interconnect topology", None),
    "accelerator_on-chip_memories": ("accelerator on-chip memories", None),
    "hw_notes": ("extra hardware notes", None),
    "sw_notes": ("extra software notes", None),
}

# The training log's submission_status -> the system description's status (training, 4.0.0+).
TRAINING_STATUS = {
    "onprem": "Available on-premise",
    "cloud": "Available cloud",
    "research": "Research, Development, or Internal (RDI)",
    "preview": "Preview",
}
# ... and the inference submission checker's.
INFERENCE_STATUS = {"onprem": "available", "cloud": "available", "research": "rdi", "preview": "preview"}


def set_command(key: str, example: str | None = None) -> str:
    allowed = KEYS.get(key, ("", None))[1]
    example = example or (allowed[0] if allowed else "VALUE")
    return f'runner config set {SECTION}.{key} "{example}"'


def _check(key: str, value: str) -> None:
    if key not in KEYS:
        raise UserError(f"unknown setting {SECTION}.{key}",
                        f"use one of: {', '.join(f'{SECTION}.{k}' for k in KEYS)}")
    allowed = KEYS[key][1]
    if allowed and value not in allowed:
        raise UserError(f"{SECTION}.{key} must be one of {', '.join(allowed)}, not {value!r}",
                        set_command(key, allowed[0]))
    if not value.strip():
        raise UserError(f"{SECTION}.{key} cannot be empty", set_command(key))


def _read(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise UserError(f"{path} is not valid YAML ({exc.__class__.__name__})",
                        f"fix or delete {path} and set the values again") from None
    if not isinstance(data, dict):
        raise UserError(f"{path} must hold a mapping", f"fix or delete {path}")
    return data


def load_settings(path: Path | None = None) -> dict[str, str]:
    section = _read(path or paths.config_path()).get(SECTION) or {}
    return {str(k): str(v) for k, v in section.items()} if isinstance(section, dict) else {}


def _key(dotted: str) -> str:
    """``mlperf.<key>`` -> ``<key>``, refusing any other section."""
    section, _, key = dotted.partition(".")
    if section != SECTION or not key:
        raise UserError(f"unknown setting {dotted!r}", f"use {SECTION}.<key>, e.g. {set_command('org', 'My Lab')}")
    return key


def _write(path: Path, data: dict) -> None:
    """The file is replaced whole, so it is never half-written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(data, sort_keys=True))
    tmp.replace(path)


def set_value(dotted: str, value: str, path: Path | None = None) -> Path:
    """Write ``mlperf.<key> = value``."""
    key = _key(dotted)
    _check(key, value)
    path = path or paths.config_path()
    data = _read(path)
    data.setdefault(SECTION, {})[key] = value
    _write(path, data)
    return path


def unset_value(dotted: str, path: Path | None = None) -> tuple[Path, bool]:
    """Remove ``mlperf.<key>``; returns the file and whether the key was set."""
    key = _key(dotted)
    if key not in KEYS:
        _check(key, "")  # names the known keys
    path = path or paths.config_path()
    data = _read(path)
    section = data.get(SECTION)
    if not isinstance(section, dict) or key not in section:
        return path, False
    del section[key]
    if not section:
        del data[SECTION]
    _write(path, data)
    return path, True


@dataclass(frozen=True)
class SubmissionConfig:
    """The settings one export or log uses; ``require`` names what is missing and how to set it."""

    values: dict[str, str] = field(default_factory=dict)

    def get(self, key: str) -> str | None:
        value = self.values.get(key)
        return value if value and value.strip() else None

    def require(self, key: str, why: str = "the MLPerf export") -> str:
        value = self.get(key)
        if value is None:
            raise UserError(f"{why} needs {SECTION}.{key} ({KEYS[key][0]}), which is not set",
                            set_command(key))
        return value

    @property
    def org(self) -> str:
        return self.require("org")

    @property
    def platform(self) -> str:
        return self.require("platform")

    @property
    def division(self) -> str:
        return self.require("division")

    @property
    def status(self) -> str:
        return self.require("status")


def load_submission(path: Path | None = None) -> SubmissionConfig:
    values = load_settings(path)
    for key, value in values.items():
        if key in KEYS:
            _check(key, value)
    return SubmissionConfig(values)
