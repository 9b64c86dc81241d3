"""What an entry's Dockerfile may ask the engine to do, checked before any build.

``--network none`` only takes the network from ``RUN`` steps; the engine itself still
fetches whatever an instruction names: a ``FROM`` image from a registry, an ``ADD`` URL
or git repository, a ``COPY --from`` / ``RUN --mount from=`` image, a ``# syntax``
frontend. So the policy (docs/run-contract.md, "Dockerfile policy") is:

- ``FROM`` names only the runner-given ``${BASE_IMAGE}`` or an earlier stage;
- ``ADD`` takes only files of the build context (no URL, no git);
- ``COPY --from`` and ``RUN --mount ... from=`` name only earlier stages;
- no ``RUN --network``, no ``ONBUILD``, no ``# syntax`` directive, no ``--platform``.

Each refusal names the Dockerfile line.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from runner.errors import UserError

BASE_ARG = "BASE_IMAGE"
_BASE_REFS = {f"${{{BASE_ARG}}}", f"${BASE_ARG}"}
_DIRECTIVE = re.compile(r"^#\s*([a-zA-Z]+)\s*=\s*(.*?)\s*$")
_REMOTE = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*://|git@|github\.com/)")
MAX_DOCKERFILE_BYTES = 256 * 1024
FIX = "see the Dockerfile policy in docs/run-contract.md"


@dataclass(frozen=True)
class Instruction:
    line: int  # 1-based line where the instruction starts
    name: str  # upper case
    args: str


def _refuse(path: Path, line: int, problem: str, fix: str = FIX) -> UserError:
    return UserError(f"{path.name} line {line}: {problem}", fix)


def instructions(path: Path, text: str) -> list[Instruction]:
    """Logical instructions (continuations joined, comments dropped) with their line."""
    escape = "\\"
    lines = text.splitlines()
    found: list[Instruction] = []
    in_header = True
    current: list[str] = []
    start = 0
    for number, raw in enumerate(lines, 1):
        stripped = raw.strip()
        if in_header and (m := _DIRECTIVE.match(stripped)):
            key, value = m.group(1).lower(), m.group(2)
            if key == "syntax":
                raise _refuse(path, number, f"the '# syntax={value}' directive makes the engine fetch a frontend image",
                              "remove the directive; " + FIX)
            if key == "escape":
                escape = value or escape
            continue
        in_header = False
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if current and stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if not current:
            start = number
        body = raw.rstrip()
        if body.endswith(escape):
            current.append(body[: -len(escape)])
            continue
        current.append(body)
        found.append(_instruction(start, current))
        current = []
    if current:  # a continuation at the end of the file
        found.append(_instruction(start, current))
    return found


def _instruction(start: int, parts: list[str]) -> Instruction:
    word, _, args = " ".join(p.strip() for p in parts if p.strip()).partition(" ")
    return Instruction(start, word.upper(), args.strip())


def _flags(args: str) -> tuple[dict[str, str], list[str]]:
    """``--name=value`` flags and the remaining words of an instruction."""
    try:
        words = shlex.split(args, posix=True)
    except ValueError:
        words = args.split()
    flags: dict[str, str] = {}
    rest = list(words)
    while rest and rest[0].startswith("--"):
        name, _, value = rest.pop(0)[2:].partition("=")
        name = name.lower()
        # Several --mount flags are allowed: keep them all, ';'-separated.
        flags[name] = f"{flags[name]};{value}" if name in flags else value
    return flags, rest


def _is_stage(ref: str, stages: list[str], by_index: bool = True) -> bool:
    """``ref`` names an earlier stage (by its name, or by its index where Docker allows)."""
    if ref and ref.lower() in [s for s in stages if s]:
        return True
    return by_index and ref.isdigit() and int(ref) < len(stages)


def check_dockerfile(path: Path) -> None:
    """UserError naming the first line that breaks the policy; None when it is clean."""
    if path.is_symlink() or not path.is_file():
        raise UserError(f"{path} is not a plain file", "make the Dockerfile a regular file in the entry folder")
    if path.stat().st_size > MAX_DOCKERFILE_BYTES:
        raise UserError(f"{path} is over {MAX_DOCKERFILE_BYTES // 1024} KiB", "keep the Dockerfile short")
    text = path.read_text(encoding="utf-8", errors="replace")
    stages: list[str] = []  # lower-case stage names, "" for an unnamed stage
    for ins in instructions(path, text):
        flags, words = _flags(ins.args)
        if ins.name == "FROM":
            if "platform" in flags:
                raise _refuse(path, ins.line, "FROM --platform may make the engine pull another platform's image")
            image = words[0] if words else ""
            if image not in _BASE_REFS and not _is_stage(image, stages, by_index=False):
                raise _refuse(path, ins.line, f"FROM {image} is neither ${{{BASE_ARG}}} nor an earlier stage "
                              "(the engine would pull it)", f"use FROM ${{{BASE_ARG}}} (the runner gives the base image); {FIX}")
            name = words[2].lower() if len(words) >= 3 and words[1].lower() == "as" else ""
            stages.append(name)
        elif ins.name == "ADD":
            # Shell form or exec form (["https://...", "/dest"]): strip the JSON punctuation.
            remote = [w.strip('[],"\'') for w in words if _REMOTE.match(w.strip('[],"\''))]
            if remote or "checksum" in flags or "keep-git-dir" in flags:
                what = remote[0] if remote else "a remote source"
                raise _refuse(path, ins.line, f"ADD {what} makes the engine download it",
                              f"put the file in the entry folder and COPY it; {FIX}")
        elif ins.name == "COPY":
            ref = flags.get("from")
            if ref is not None and not _is_stage(ref, stages):
                raise _refuse(path, ins.line, f"COPY --from={ref} is not an earlier stage (the engine would pull it)",
                              f"build it in a stage of this Dockerfile; {FIX}")
        elif ins.name == "RUN":
            if "network" in flags:
                raise _refuse(path, ins.line, f"RUN --network={flags['network']} asks for a network; builds have none")
            for mount in filter(None, flags.get("mount", "").split(";")):
                opts = dict(part.partition("=")[::2] for part in mount.split(","))
                ref = opts.get("from")
                if ref is not None and not _is_stage(ref, stages):
                    raise _refuse(path, ins.line, f"RUN --mount from={ref} is not an earlier stage (the engine would pull it)")
        elif ins.name == "ONBUILD":
            raise _refuse(path, ins.line, "ONBUILD is not allowed (it runs steps in images built later)")
        elif ins.name not in {"ARG", "ENV", "LABEL", "WORKDIR", "USER", "CMD", "ENTRYPOINT", "EXPOSE",
                              "VOLUME", "SHELL", "STOPSIGNAL", "HEALTHCHECK", "MAINTAINER"}:
            raise _refuse(path, ins.line, f"unknown instruction {ins.name[:40]}")
        if ins.name not in ("FROM", "ARG") and not stages:
            raise _refuse(path, ins.line, f"{ins.name} before the first FROM")
