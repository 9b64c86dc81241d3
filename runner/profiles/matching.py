"""Does a host fingerprint meet a profile? Every broken rule is reported, by name.

Memory of a GPU must be within 5% of the profile's: NVML reports slightly less than the
marketing size (a "16 GB" V100 shows 15.8 GiB), but a 32 GB board is not a 16 GB one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runner.errors import UserError
from runner.profiles.profile import Profile

GIB = 1024**3
GPU_MEMORY_TOLERANCE = 0.05


@dataclass(frozen=True)
class Mismatch:
    rule: str        # e.g. "gpu.count", "gpu[3].name", "cpu.flags"
    expected: object
    actual: object
    message: str     # the whole sentence, starting with the rule

    def __str__(self) -> str:
        return self.message


def _gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


def _num(value: float) -> str:
    return f"{value:g}"


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text))


def _match_gpus(profile: Profile, gpu: dict) -> list[Mismatch]:
    rules = profile.gpu
    assert rules is not None
    out: list[Mismatch] = []
    gpus = gpu.get("gpus") or []
    if gpu.get("driver") is None:
        why = gpu.get("note") or "no NVIDIA driver"
        return [Mismatch("gpu.count", rules.count, 0, f"gpu.count: expected {rules.count}, found 0 ({why})")]
    if len(gpus) != rules.count:
        out.append(Mismatch("gpu.count", rules.count, len(gpus), f"gpu.count: expected {rules.count}, found {len(gpus)}"))
    if rules.min_driver and _version(gpu["driver"]) < _version(rules.min_driver):
        out.append(Mismatch(
            "gpu.driver", rules.min_driver, gpu["driver"],
            f"gpu.driver: {gpu['driver']} is older than the required {rules.min_driver}",
        ))
    want_bytes = rules.memory_gib * GIB
    for g in gpus:
        at = f"gpu[{g.get('index')}]"
        name = g.get("name")
        if not name or not re.search(rules.name_pattern, name, re.IGNORECASE):
            out.append(Mismatch(
                f"{at}.name", rules.name_pattern, name,
                f"{at}.name: {name!r} does not match {rules.name_pattern!r}",
            ))
        memory = g.get("memory_total_bytes")
        if memory is None:
            out.append(Mismatch(f"{at}.memory", rules.memory_gib, None,
                                f"{at}.memory: unreadable; profile requires {_num(rules.memory_gib)} GiB"))
        elif abs(memory - want_bytes) > GPU_MEMORY_TOLERANCE * want_bytes:
            out.append(Mismatch(
                f"{at}.memory", rules.memory_gib, memory,
                f"{at}.memory: {_gib(memory)} is not within 5% of {_num(rules.memory_gib)} GiB",
            ))
        capability = g.get("compute_capability")
        if rules.compute_capability and capability != rules.compute_capability:
            out.append(Mismatch(
                f"{at}.compute_capability", rules.compute_capability, capability,
                f"{at}.compute_capability: expected {rules.compute_capability}, found {capability}",
            ))
        if not rules.allow_mig and (g.get("mig") or {}).get("enabled"):
            out.append(Mismatch(
                f"{at}.mig", False, True, f"{at}.mig: MIG mode is enabled; profile requires it disabled",
            ))
    return out


_REGEX_SPECIAL = set(".^$*+?{}[]|()")


def _literal(piece: str) -> str | None:
    """``piece`` as the text it matches, when it is plain text (escapes allowed); else None."""
    out, escaped = [], False
    for ch in piece:
        if escaped:
            if ch.isalnum():  # \d, \w, \b...: a class, not a character
                return None
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in _REGEX_SPECIAL:
            return None
        else:
            out.append(ch)
    return None if escaped else "".join(out)


def describe_pattern(pattern: str) -> str:
    """A profile's name or model rule as people read it, as ``match`` applies it (searched in
    the name, in any case): ``A100.*40GB`` is 'contains "A100" then "40GB"', ``^Intel|AMD`` is
    'starts with "Intel" or contains "AMD"'. A pattern beyond plain text, ``.*``, ``^``, ``$``
    and ``|`` is shown as the regular expression it is."""
    described = []
    for alternative in pattern.split("|"):
        start = alternative.startswith("^")
        end = alternative.endswith("$") and not alternative.endswith("\\$")
        body = alternative[int(start):len(alternative) - int(end)]
        pieces = [_literal(p) for p in body.split(".*")]
        if None in pieces or not any(pieces):
            return f"matches the regular expression {pattern!r}"
        words: list[str] = []
        for i, piece in enumerate(pieces):
            if piece:
                verb = "starts with" if i == 0 and start else "contains" if not words else "then"
                words.append(f'{verb} "{piece}"')
        described.append(" ".join(words) + (" at the end" if end else ""))
    return " or ".join(described)


def _match_cpu(profile: Profile, cpu: dict, memory: dict) -> list[Mismatch]:
    rules = profile.cpu
    out: list[Mismatch] = []
    if rules.architecture and cpu.get("architecture") != rules.architecture:
        out.append(Mismatch("cpu.architecture", rules.architecture, cpu.get("architecture"),
                            f"cpu.architecture: expected {rules.architecture}, found {cpu.get('architecture')}"))
    if rules.vendor and cpu.get("vendor") != rules.vendor:
        out.append(Mismatch("cpu.vendor", rules.vendor, cpu.get("vendor"),
                            f"cpu.vendor: expected {rules.vendor}, found {cpu.get('vendor')}"))
    model = cpu.get("model_name")
    if rules.model_pattern and not (model and re.search(rules.model_pattern, model, re.IGNORECASE)):
        out.append(Mismatch("cpu.model_name", rules.model_pattern, model,
                            f"cpu.model_name: {model!r} does not match {rules.model_pattern!r}"))
    family = cpu.get("family")
    if rules.families and family not in rules.families:
        out.append(Mismatch("cpu.family", list(rules.families), family,
                            f"cpu.family: expected one of {', '.join(map(str, rules.families))}, found {family}"))
    cores = cpu.get("logical_cores")
    if rules.min_logical_cores and (cores is None or cores < rules.min_logical_cores):
        out.append(Mismatch("cpu.logical_cores", rules.min_logical_cores, cores,
                            f"cpu.logical_cores: expected at least {rules.min_logical_cores}, found {cores}"))
    if rules.max_logical_cores and (cores is None or cores > rules.max_logical_cores):
        out.append(Mismatch("cpu.logical_cores", rules.max_logical_cores, cores,
                            f"cpu.logical_cores: expected at most {rules.max_logical_cores}, found {cores}"))
    flags = set(cpu.get("flags") or [])
    missing = [f for f in rules.required_flags if f not in flags]
    if missing:
        out.append(Mismatch("cpu.flags", list(rules.required_flags), sorted(flags & set(rules.required_flags)),
                            f"cpu.flags: missing {', '.join(missing)}"))
    total = memory.get("total_bytes")
    if rules.min_memory_gib and (total is None or total < rules.min_memory_gib * GIB):
        found = _gib(total) if total is not None else "unknown"
        out.append(Mismatch("memory.total", rules.min_memory_gib, total,
                            f"memory.total: {found} is less than the required {_num(rules.min_memory_gib)} GiB"))
    return out


def _on_node(mismatch: Mismatch, node: int, fingerprint: dict) -> Mismatch:
    host = (fingerprint.get("host") or {}).get("hostname")
    return Mismatch(f"node{node}.{mismatch.rule}", mismatch.expected, mismatch.actual,
                    f"node {node} ({host}): {mismatch.message}")


def match(profile: Profile, fingerprint: dict, nodes: int = 1, node: int = 0) -> list[Mismatch]:
    """Every rule of ``profile`` that the host in ``fingerprint`` breaks; [] when it matches.

    A run spanning ``nodes`` machines: node 0's list starts with a node count that differs
    from the profile's, and every mismatch names its node (``node 1 (host): ...``)."""
    out: list[Mismatch] = []
    if node == 0 and nodes != profile.nodes:
        out.append(Mismatch("nodes", profile.nodes, nodes, f"nodes: expected {profile.nodes}, found {nodes}"))
    rules: list[Mismatch] = []
    if profile.gpu is not None:
        rules += _match_gpus(profile, fingerprint.get("gpu") or {})
    rules += _match_cpu(profile, fingerprint.get("cpu") or {}, fingerprint.get("memory") or {})
    return out + ([_on_node(m, node, fingerprint) for m in rules] if nodes > 1 else rules)


def match_nodes(profile: Profile, fingerprints: list[dict]) -> list[Mismatch]:
    """``match`` over every node of a run, node 0 (the run's own host) first."""
    return [m for i, fp in enumerate(fingerprints) for m in match(profile, fp, len(fingerprints), i)]


def hardware_record(profile: Profile, mismatches: list[Mismatch], allowed_mismatch: bool, nodes: int = 1) -> dict:
    """``result.json``'s ``hardware`` section."""
    return {
        "profile": profile.id,
        "matched": not mismatches,
        "mismatches": [str(m) for m in mismatches],
        "allowed_mismatch": bool(allowed_mismatch and mismatches),
        "nodes": nodes,
    }


def require_match(profile: Profile, fingerprint: dict, allow_mismatch: bool = False, *,
                  of: str | None = None, also: str | None = None, nodes: int = 1) -> dict:
    """The ``hardware`` record, or a UserError naming every mismatch unless they are allowed.

    With ``allow_mismatch`` the run goes ahead; the caller marks the result non-conforming
    with ``"hardware mismatch: " + "; ".join(record["mismatches"])``. ``of`` names what needs
    the profile (an entry) and ``also`` adds another way out to the fix.
    """
    mismatches = match(profile, fingerprint, nodes)
    if mismatches and not allow_mismatch:
        whose = f" of {of}" if of else ""
        raise UserError(
            f"this host does not match hardware profile '{profile.id}'{whose}: "
            + "; ".join(map(str, mismatches)),
            "run on the profile's hardware, or pass --allow-hardware-mismatch (the result is then "
            "non-conforming)" + (f", {also}" if also else ""),
        )
    return hardware_record(profile, mismatches, allow_mismatch, nodes)
