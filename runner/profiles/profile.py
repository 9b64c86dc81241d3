"""Typed hardware profiles loaded from ``hardware_profiles/<id>.yaml``."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from runner import paths
from runner.errors import UserError
from runner.profiles.schema import PROFILE_SCHEMA

if TYPE_CHECKING:
    import jsonschema



@dataclass(frozen=True)
class GpuRules:
    name_pattern: str
    count: int
    memory_gib: float
    compute_capability: str | None = None
    allow_mig: bool = False
    min_driver: str | None = None


@dataclass(frozen=True)
class CpuRules:
    architecture: str | None = None
    vendor: str | None = None
    model_pattern: str | None = None
    min_logical_cores: int | None = None
    max_logical_cores: int | None = None
    required_flags: tuple[str, ...] = ()
    min_memory_gib: float | None = None
    families: tuple[int, ...] = ()  # /proc/cpuinfo "cpu family" values (AMD Zen 4: 25)


@dataclass(frozen=True)
class ContainerLimits:
    """What a CPU profile's container gets: ``docker run --cpus CPUS --memory MEMORY``."""

    cpus: float
    memory: str


@dataclass(frozen=True)
class Price:
    usd_per_hour: float
    region: str
    date: str
    source: str
    note: str | None = None


@dataclass(frozen=True)
class Peak:
    """Peak compute per precision and memory bandwidth, for a roofline."""

    tflops: dict[str, float]
    memory_bandwidth_gbs: float
    source: str


@dataclass(frozen=True)
class Profile:
    id: str
    description: str
    price: Price
    cloud: str | None = None
    instance_type: str | None = None
    gpu: GpuRules | None = None
    cpu: CpuRules = field(default_factory=CpuRules)
    container_limits: ContainerLimits | None = None
    peak: Peak | None = None
    path: Path | None = None
    nodes: int = 1  # machines one run spans; every rule (and the price) is per node

    @property
    def gpu_count(self) -> int:
        return self.gpu.count if self.gpu else 0

    @property
    def is_cpu_profile(self) -> bool:
        return self.gpu is None


def _field_path(err: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in err.absolute_path) or "(top level)"


def validate_profile(data: object, source: str) -> None:
    import jsonschema  # lazy: start-up (runner ls reads profiles' prices, never validates one)

    validator = jsonschema.Draft202012Validator(PROFILE_SCHEMA)
    errors = sorted(validator.iter_errors(data), key=lambda e: (len(e.absolute_path), e.message))
    if errors:
        err = errors[0]
        where = _field_path(err)
        if err.validator == "anyOf" and where == "(top level)":
            problem = f"{source}: a profile needs a 'gpu' section or, for a CPU profile, 'container_limits'"
        else:
            problem = f"{source}: field '{where}' is invalid: {err.message}"
        raise UserError(problem, f"correct {where} (see hardware_profiles/README.md)")


def _dates_to_text(value: object) -> object:
    # YAML reads 2025-06-01 as a date; the schema wants the text the author wrote.
    if isinstance(value, dict):
        return {k: _dates_to_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_dates_to_text(v) for v in value]
    return value.isoformat() if isinstance(value, dt.date) else value


def profile_from_dict(data: dict, source: str = "profile", path: Path | None = None) -> Profile:
    converted = _dates_to_text(data)
    assert isinstance(converted, dict)  # a mapping's dates as text: a mapping still
    data = converted
    validate_profile(data, source)
    gpu = data.get("gpu")
    cpu = dict(data.get("cpu") or {})
    cpu["required_flags"] = tuple(cpu.get("required_flags", ()))
    cpu["families"] = tuple(cpu.get("families", ()))
    limits = data.get("container_limits")
    return Profile(
        id=data["id"],
        description=data["description"],
        price=Price(**data["price"]),
        cloud=data.get("cloud"),
        instance_type=data.get("instance_type"),
        gpu=GpuRules(**gpu) if gpu else None,
        cpu=CpuRules(**cpu),
        container_limits=ContainerLimits(cpus=float(limits["cpus"]), memory=str(limits["memory"])) if limits else None,
        peak=Peak(**data["peak"]) if data.get("peak") else None,
        path=path,
        nodes=data.get("nodes", 1),
    )


def load_profile_file(path: str | Path) -> Profile:
    file = Path(path)
    try:
        data = yaml.safe_load(file.read_text())
    except OSError as err:
        raise UserError(f"cannot read hardware profile {file}: {err.strerror}", "check the path") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise UserError(f"{file} is not valid YAML{at}", "fix the YAML syntax") from None
    profile = profile_from_dict(data, str(file), file)
    if profile.id != file.stem:
        raise UserError(f"{file}: field 'id' is '{profile.id}' but the file is '{file.name}'", f"set id: {file.stem}")
    return profile


def list_profiles(directory: str | Path | None = None) -> list[str]:
    folder = Path(directory) if directory else paths.profiles_dir()
    return sorted(p.stem for p in folder.glob("*.yaml"))


def load_profile(profile_id: str, directory: str | Path | None = None) -> Profile:
    """``hardware_profiles/<profile_id>.yaml`` as a validated ``Profile``."""
    folder = Path(directory) if directory else paths.profiles_dir()
    file = folder / f"{profile_id}.yaml"
    if not file.is_file():
        known = ", ".join(list_profiles(folder)) or "none"
        raise UserError(f"no hardware profile '{profile_id}' in {folder}", f"use one of: {known}")
    return load_profile_file(file)
