"""The recipe's optimizations as switches (``entry.yaml``'s ``switches``), for ``runner study
lesion`` and ``runner study factors``.

Each switch names one optimization, its kind (DAWNBench's three: software, hardware,
statistical) and what turns it off (``disable``): an environment variable of the run contract's
namespace (``RUNNER_SWITCH_<NAME>``, set to ``0``; never ``RUNNER_SEED`` or another runner
variable) or a declared hyperparameter's value (the global batch size, its learning rate
scaled by the manifest's rule). A switch left on passes nothing, so the recipe with every
switch on runs exactly as a plain reproduction. A switch may say on which hosts it has any
effect (``host_cpu_flags``: any one of them); elsewhere the recipe already runs without it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runner.errors import UserError

KINDS = ("software", "hardware", "statistical")
ENV_PREFIX = "RUNNER_SWITCH_"
ENV_PATTERN = r"^RUNNER_SWITCH_[A-Z0-9][A-Z0-9_]{0,47}$"
OFF_VALUE = "0"

# The part of entry.yaml's JSON Schema (runner.manifest.schema) that describes a switch.
SWITCHES_SCHEMA: dict = {
    "type": "array",
    "minItems": 1,
    "maxItems": 32,
    "description": "the recipe's optimizations, in the order `runner study factors` adds them back; "
    "`runner study lesion` turns each off alone (the run contract's RUNNER_SWITCH_* variables)",
    "items": {
        "type": "object",
        "additionalProperties": False,
        "required": ["name", "kind", "disable"],
        "properties": {
            "name": {"type": "string", "pattern": "^[a-z][a-z0-9-]{0,31}$"},
            "kind": {"enum": list(KINDS)},
            "description": {"type": "string", "maxLength": 300},
            "disable": {  # not "off": YAML reads that key as false
                "type": "object",
                "additionalProperties": False,
                "minProperties": 1,
                "maxProperties": 1,
                "description": "what turns it off: env (a RUNNER_SWITCH_* variable the runner sets to 0) or "
                "global_batch_size (a declared smaller or larger batch; the learning rate follows the "
                "hyperparameters' lr_scaling)",
                "properties": {
                    "env": {"type": "string", "maxLength": 64},  # its namespace is checked by ``parse``
                    "global_batch_size": {"type": "integer", "minimum": 1},
                },
            },
            "host_cpu_flags": {
                "type": "array", "minItems": 1, "uniqueItems": True,
                "items": {"type": "string", "pattern": "^[a-z0-9_]{1,32}$"},
                "description": "the switch has an effect only on a host with one of these CPU flags "
                "(elsewhere the recipe already runs without it)",
            },
        },
    },
}


@dataclass(frozen=True)
class Switch:
    name: str
    kind: str  # one of KINDS
    env: str | None = None  # RUNNER_SWITCH_*: set to "0" to turn it off
    batch_size: int | None = None  # or: the global batch size that turns it off
    description: str = ""
    host_cpu_flags: tuple[str, ...] = ()  # an effect only on hosts with one of these (empty: every host)

    def off_text(self) -> str:
        return f"{self.env}=0" if self.env else f"global batch size {self.batch_size}"

    def no_effect_on(self, cpu_flags, where: str = "this host") -> str | None:
        """Why turning it off changes nothing on a host with ``cpu_flags`` (None: it does)."""
        if not self.host_cpu_flags or set(self.host_cpu_flags) & set(cpu_flags):
            return None
        return (f"no effect on {where}: none of the CPU flags {', '.join(self.host_cpu_flags)} there, "
                "so the recipe already runs without it")


def parse(section: list | None, hyperparameters, manifest: str) -> tuple[Switch, ...]:
    """The switches of a manifest whose schema already passed; a one-line UserError for what
    the schema cannot say (the variable's namespace, names or variables used twice, a batch
    size without declared hyperparameters)."""
    switches, names, variables = [], set(), set()
    for i, item in enumerate(section or []):
        where = f"{manifest}: field 'switches.{i}"
        name, off = item["name"], item["disable"]
        if name in names:
            raise UserError(f"{where}.name' names switch '{name}' twice", "give each switch its own name")
        names.add(name)
        env = off.get("env")
        if env is not None:
            if not re.fullmatch(ENV_PATTERN, env):
                raise UserError(
                    f"{where}.disable.env' is {env[:64]!r}, outside the run contract's namespace for switches",
                    f"name it {ENV_PREFIX}<NAME> (capitals, digits, _): a manifest cannot set RUNNER_SEED or "
                    "any other variable of the runner or the system")
            if env in variables:
                raise UserError(f"{where}.disable.env' {env} turns off two switches",
                                "give each switch its own variable")
            variables.add(env)
        batch = off.get("global_batch_size")
        if batch is not None:
            if hyperparameters is None:
                raise UserError(f"{where}.disable' sets global_batch_size but the entry declares no hyperparameters",
                                "add a hyperparameters: section (global_batch_size, base_lr, lr_scaling)")
            if batch == hyperparameters.default_batch_size:
                raise UserError(f"{where}.disable.global_batch_size' is the recipe's own batch size ({batch})",
                                "name the batch size the recipe would use without this optimization")
        switches.append(Switch(name, item["kind"], env, batch, item.get("description", ""),
                               tuple(item.get("host_cpu_flags", ()))))
    return tuple(switches)


def chosen(switches: tuple[Switch, ...], names, entry_name: str) -> list[Switch]:
    """The declared switches named in ``names`` (in the manifest's order); a UserError for any other."""
    declared = {s.name: s for s in switches}
    if unknown := [n for n in names if n not in declared]:
        raise UserError(
            f"entry {entry_name} declares no switch {', '.join(map(repr, unknown))}",
            f"choose from: {', '.join(declared)}" if declared else
            "declare the recipe's optimizations in a switches: section of its entry.yaml (docs/studies.md)")
    return [s for s in switches if s.name in set(names)]


def turned_off(switches: tuple[Switch, ...], names, hyperparameters, entry_name: str) -> tuple[dict, dict]:
    """(environment, hyperparameters) that turn off the switches ``names``: ``RUNNER_SWITCH_*``
    variables set to 0, and a declared batch size with its learning rate."""
    env, values = {}, {}
    for switch in chosen(switches, names, entry_name):
        if switch.env:
            env[switch.env] = OFF_VALUE
        else:
            values = hyperparameters.for_batch_size(switch.batch_size)
    return env, values
