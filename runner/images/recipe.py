"""Base image recipes: one folder per image under ``images/``, holding ``recipe.yaml``.

Two kinds:
- ``debootstrap``: a Debian suite and a package list, built locally (no registry needed);
- ``registry``: a reference pinned by digest, pulled on hosts that have a registry.

The image tag carries the sha256 of the recipe folder, so a tag names one recipe
content exactly and an unchanged recipe is never rebuilt.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import yaml

from runner import paths
from runner.errors import UserError

TAG_REPOSITORY = "runner/base"
MIRROR_ENV = "RUNNER_DEBIAN_MIRROR"
# Part of every recipe hash: bumped when the way images are built changes, so images
# built by an older builder are not mistaken for the current recipe's.
BUILDER_FORMAT = "runner-base/2"
_DIGEST_REF = re.compile(r"^[\w.\-/:]+@sha256:[0-9a-f]{64}$")


@dataclass(frozen=True)
class Recipe:
    name: str
    folder: Path
    kind: str  # "debootstrap" | "registry"
    content_hash: str
    description: str = ""
    # debootstrap recipes
    suite: str = ""
    variant: str = "minbase"
    mirror: str = ""
    components: list[str] = field(default_factory=list)
    packages: list[str] = field(default_factory=list)
    source_date_epoch: int = 0
    env: dict[str, str] = field(default_factory=dict)
    cmd: list[str] = field(default_factory=list)
    # registry recipes
    reference: str = ""

    @property
    def tag(self) -> str:
        """``runner/base:<name>-<first 16 hex of the recipe hash>``."""
        return f"{TAG_REPOSITORY}:{self.name}-{self.content_hash[:16]}"

    @property
    def effective_mirror(self) -> str:
        return os.environ.get(MIRROR_ENV) or self.mirror


def recipe_hash(folder: Path) -> str:
    """sha256 over the builder format and every file in the folder (relative path and
    bytes, in sorted order)."""
    digest = hashlib.sha256(BUILDER_FORMAT.encode() + b"\0")
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix().encode()
        data = path.read_bytes()
        digest.update(len(rel).to_bytes(8, "big") + rel)
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def available(root: Path | None = None) -> list[str]:
    root = root or paths.images_dir()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "recipe.yaml").is_file())


def load_recipe(name: str, root: Path | None = None) -> Recipe:
    root = root or paths.images_dir()
    folder = root / name
    recipe_file = folder / "recipe.yaml"
    if not recipe_file.is_file():
        known = ", ".join(available(root)) or "none"
        raise UserError(
            f"no base image recipe named '{name}' in {root}",
            f"use one of: {known} (see `runner images list`)",
        )
    try:
        data = yaml.safe_load(recipe_file.read_text()) or {}
    except yaml.YAMLError:
        raise UserError(f"{recipe_file} is not valid YAML", "fix the YAML syntax") from None
    if not isinstance(data, dict):
        raise UserError(f"{recipe_file} is not a mapping", "write the recipe as key: value pairs")
    kind = data.get("kind")
    # What every kind of recipe has.
    common = partial(Recipe, name=name, folder=folder, kind=str(kind), content_hash=recipe_hash(folder),
                     description=str(data.get("description", "")))
    if kind == "debootstrap":
        missing = [k for k in ("suite", "mirror", "packages", "source_date_epoch") if k not in data]
        if missing:
            raise UserError(
                f"{recipe_file} lacks {', '.join(missing)}",
                "a debootstrap recipe needs suite, mirror, packages and source_date_epoch",
            )
        return common(
            suite=str(data["suite"]),
            variant=str(data.get("variant", "minbase")),
            mirror=str(data["mirror"]),
            components=[str(c) for c in data.get("components", ["main"])],
            packages=[str(p) for p in data["packages"]],
            source_date_epoch=int(data["source_date_epoch"]),
            env={str(k): str(v) for k, v in (data.get("env") or {}).items()},
            cmd=[str(c) for c in data.get("cmd", [])],
        )
    if kind == "registry":
        reference = str(data.get("reference", ""))
        if not _DIGEST_REF.match(reference):
            raise UserError(
                f"{recipe_file}: reference '{reference}' is not pinned by digest",
                "write it as name:tag@sha256:<64 hex digits>",
            )
        return common(reference=reference)
    raise UserError(
        f"{recipe_file}: kind is {kind!r}", "set kind to 'debootstrap' or 'registry'"
    )
