"""The reviewed wheels: those whose files do not count in an entry's information budget.

A lock may pin any published package, and a package may hold a trained network (a few small
quantised networks are some 25 KB of Python). So the files a locked wheel installs count in
the information budget (``information``) like any other file the entry brings, unless the
wheel is on the allow-list kept beside this module, ``wheel_allowlist.toml``: one row per
wheel, its distribution name, version and sha256 (the digest a lock's ``--hash=sha256:``
names, so one published file and no other), and a line of why it is there. The list holds
the frameworks and their dependencies that the project's honest entries lock; it is data in
the repository, changed by review like code. A wheel matches a row only by all three of name,
version and digest: a row with another digest exempts nothing.

``python -m runner.entry_build.wheel_allowlist LOCK...`` prints, for review, a row for every
pin of those locks that the list does not hold yet (its reason left for the reviewer).
"""

from __future__ import annotations

import functools
import hashlib
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from runner.digests import sha256_file
from runner.entry_build.lockfile import normalise_name, parse_lock

ALLOWLIST_FILE = Path(__file__).with_name("wheel_allowlist.toml")
# A wheel's file name: {distribution}-{version}(-{build})?-{python}-{abi}-{platform}.whl
_WHEEL_NAME = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(?:-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class WheelId:
    """One wheel file: its distribution name and version (from its file name) and its digest."""

    name: str
    version: str
    sha256: str

    @property
    def label(self) -> str:
        return f"{self.name}=={self.version}"


@dataclass(frozen=True)
class AllowedWheel:
    name: str
    version: str
    sha256: str
    why: str


def wheel_id(path: Path) -> WheelId:
    """The name, version and sha256 of a wheel file."""
    match = _WHEEL_NAME.match(path.name)
    name, version = (match["name"], match["version"]) if match else (path.stem, "?")
    return WheelId(normalise_name(name), version, sha256_file(path))


def _same_version(a: str, b: str) -> bool:
    """Versions as written in a lock and in a wheel's file name (``_`` for ``-``, any case)."""
    return a.strip().lower().replace("_", "-") == b.strip().lower().replace("_", "-")


@dataclass(frozen=True)
class Allowlist:
    rows: tuple[AllowedWheel, ...]
    digest: str  # of the list's text: what an answer computed with it is kept under

    def allows(self, wheel: WheelId) -> bool:
        """A row with the wheel's name, version and digest, all three."""
        return any(row.sha256 == wheel.sha256 and normalise_name(row.name) == wheel.name
                   and _same_version(row.version, wheel.version) for row in self.rows)

    def holds(self, name: str, version: str, sha256: str) -> bool:
        return self.allows(WheelId(normalise_name(name), version, sha256.lower()))


def parse_allowlist(text: str, where: str = "wheel_allowlist.toml") -> Allowlist:
    """The rows of an allow-list's text; a row without its four fields, or with a digest that
    is not a sha256, is refused (a reviewed list has none)."""
    rows = []
    for number, row in enumerate(tomllib.loads(text).get("wheel", []), start=1):
        fields = {k: row.get(k) for k in ("name", "version", "sha256", "why")}
        if not all(isinstance(v, str) and v.strip() for v in fields.values()):
            raise ValueError(f"{where}: wheel row {number} needs name, version, sha256 and why")
        if not _SHA256.match(fields["sha256"]):
            raise ValueError(f"{where}: wheel row {number} ({fields['name']}): sha256 is not 64 lower-case hex digits")
        rows.append(AllowedWheel(**fields))
    return Allowlist(tuple(rows), hashlib.sha256(text.encode()).hexdigest())


@functools.cache
def load_allowlist(path: Path = ALLOWLIST_FILE) -> Allowlist:
    """The repository's reviewed list (read once)."""
    return parse_allowlist(path.read_text(), path.name)


def candidate_rows(locks: list[Path], allowlist: Allowlist | None = None) -> str:
    """TOML rows, for review, of every pin of ``locks`` (each of its digests) that the list
    does not hold; each names the locks that pin it, its reason left to the reviewer."""
    allowlist = allowlist if allowlist is not None else load_allowlist()
    found: dict[tuple[str, str, str], list[str]] = {}
    for lock in locks:
        for pin in parse_lock(lock):
            for digest in pin.hashes:
                if not allowlist.holds(pin.name, pin.version, digest):
                    found.setdefault((pin.key, pin.version, digest), []).append(lock.as_posix())
    out = []
    for (name, version, digest), where in sorted(found.items()):
        out.append(f'[[wheel]]\nname = "{name}"\nversion = "{version}"\nsha256 = "{digest}"\n'
                   f'why = ""  # TODO: why it is there (pinned by {", ".join(sorted(set(where)))})\n')
    return "\n".join(out)


if __name__ == "__main__":
    import sys

    print(candidate_rows([Path(p) for p in sys.argv[1:]]), end="")
