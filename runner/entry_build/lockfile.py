"""Hash-pinned locks in pip's ``--require-hashes`` format.

Every requirement is ``name==version`` with at least one ``--hash=sha256:<hex>``;
lines may continue with a trailing backslash and carry an environment marker.
Anything else (an unpinned line, a missing hash, an index option that would let
the build fetch from somewhere else) is refused with its line number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from runner.data.sources import data_packages
from runner.errors import UserError

_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_REQUIREMENT = re.compile(
    rf"^(?P<name>{_NAME})(?:\[[^\]]*\])?\s*(?P<op>===|==|~=|>=|<=|!=|>|<)?\s*(?P<version>[^\s;]*)"
    r"\s*(?:;(?P<marker>[^-]*?))?\s*(?P<options>(?:--.*)?)$"
)
_HASH = re.compile(r"--hash[=\s]sha256:([0-9a-fA-F]{64})(?=\s|$)")


@dataclass(frozen=True)
class Pin:
    name: str  # as written
    version: str
    hashes: tuple[str, ...]  # sha256 hex digests, lower case
    line: int
    marker: str = ""

    @property
    def key(self) -> str:
        """The normalised project name (PEP 503)."""
        return normalise_name(self.name)

    def requirement_line(self) -> str:
        marker = f" ; {self.marker}" if self.marker else ""
        hashes = " ".join(f"--hash=sha256:{h}" for h in self.hashes)
        return f"{self.name}=={self.version}{marker} {hashes}"


def normalise_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _logical_lines(text: str):
    """Yield (first line number, text) with backslash continuations joined, comments dropped."""
    buffer, start = "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = re.sub(r"(^|\s)#.*$", "", raw).rstrip()
        if not buffer:
            start = number
        if line.endswith("\\"):
            buffer += line[:-1] + " "
            continue
        buffer += line
        if buffer.strip():
            yield start, buffer.strip()
        buffer = ""
    if buffer.strip():
        yield start, buffer.strip()


def parse_lock(path: Path) -> list[Pin]:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"lock file {path} does not exist", "add the entry's hash-pinned lock")
    pins: list[Pin] = []
    seen: dict[str, int] = {}
    for number, line in _logical_lines(path.read_text()):
        where = f"{path.name} line {number}"
        if line.startswith("-"):
            raise UserError(
                f"{where}: option '{line.split()[0]}' is not allowed in a lock",
                "list only pinned requirements; the runner chooses where wheels come from",
            )
        match = _REQUIREMENT.match(line)
        if not match:
            raise UserError(f"{where}: cannot read requirement '{line}'",
                            "write it as name==version --hash=sha256:<hex>")
        name = match["name"]
        if match["op"] != "==" or not match["version"] or "*" in match["version"]:
            raise UserError(
                f"{where}: '{name}' is not pinned to one version",
                f"pin it exactly, e.g. {name}==<version> (see the lock header for how to regenerate)",
            )
        hashes = tuple(h.lower() for h in _HASH.findall(match["options"] or ""))
        if not hashes:
            raise UserError(
                f"{where}: '{name}=={match['version']}' has no --hash=sha256:",
                "add the sha256 of each allowed file (regenerate with python -m runner.entry_build.make_lock)",
            )
        leftover = _HASH.sub("", match["options"] or "").strip()
        if leftover:
            raise UserError(f"{where}: unexpected '{leftover.split()[0]}' after '{name}'",
                            "only --hash=sha256:<hex> options may follow a pin")
        key = normalise_name(name)
        if key in seen:
            raise UserError(f"{where}: '{name}' is already pinned at line {seen[key]}",
                            "keep one pin per project")
        seen[key] = number
        pins.append(Pin(name, match["version"], hashes, number, (match["marker"] or "").strip()))
    if not pins:
        raise UserError(f"lock file {path} pins nothing", "list the entry's Python dependencies")
    return pins


def refuse_data_packages(pins: list[Pin], task: str, path: Path) -> None:
    """A lock may not pin a package the runner itself takes ``task``'s data from: it carries
    the evaluation set, labels included, into the image (threat-model class 4)."""
    carried = {normalise_name(name) for name in data_packages(task)}
    for pin in pins:
        if pin.key in carried:
            raise UserError(
                f"{Path(path).name} line {pin.line}: '{pin.name}=={pin.version}' is the package the "
                f"runner stages the {task} data set from, evaluation set and labels included",
                f"remove {pin.name} from the lock (and from requirements.in); train on the runner's "
                f"copy mounted at /data/train",
            )
