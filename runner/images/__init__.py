"""Base images: recipes in ``images/`` built (Debian) or pulled by digest (registry).

``ensure_base(name, engine)`` returns the image for a recipe, building it only when no
image carries the tag of the recipe's current content hash.
"""

from __future__ import annotations

import fcntl
import json
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from runner import paths
from runner.engine.disk import require_free_space
from runner.engine.interface import Engine, EngineError, ImageInfo
from runner.errors import UserError
from runner.images import debootstrap, registry
from runner.images.recipe import Recipe, available, load_recipe

__all__ = ["BaseImage", "Recipe", "available", "ensure_base", "find_base", "load_recipe"]

BASE_MIN_FREE_BYTES = 3 * 1024**3
LABEL_RECIPE = "org.runner.base.recipe"
LABEL_RECIPE_HASH = "org.runner.base.recipe-sha256"
# The Debian Release date the packages were resolved from (a label: config, not content,
# so it does not change the layer's digest).
LABEL_DEBIAN_RELEASE = "org.runner.base.debian-release"
# The tool that bootstrapped it and its version ("mmdebstrap 1.3.5-7"; none on bases built
# before the tool was recorded: debootstrap's).
LABEL_BASE_TOOL = "org.runner.base.tool"


@dataclass(frozen=True)
class BaseImage:
    name: str  # recipe name, e.g. "python3.11-bookworm"
    tag: str  # what an entry's Dockerfile gets as BASE_IMAGE
    id: str  # "sha256:..." image id
    built: bool = False  # True when this call built (or pulled) it
    seconds: float = 0.0


def find_base(name: str, engine: Engine, *,
              images_root: Path | None = None) -> BaseImage | None:
    """The recipe's current image if it exists locally, without building anything."""
    if engine.own_root:
        return _host_base(name, engine)
    recipe = load_recipe(name, images_root)
    ref = recipe.tag if recipe.kind == "debootstrap" else recipe.reference
    image = engine.find_image(ref)
    return None if image is None else BaseImage(name=name, tag=ref, id=image.id)


def ensure_base(name: str, engine: Engine, *,
                images_root: Path | None = None, force: bool = False) -> BaseImage:
    """The base image of recipe ``name`` (``images/<name>/``), built or pulled if missing.
    ``force`` rebuilds a Debian recipe even when its tag exists (the tag then moves). An engine
    that runs entries on the host's own root has no base image: its base is the host's
    environment, whatever the recipe (``Engine.host_base``)."""
    if engine.own_root:
        return _host_base(name, engine)
    recipe = load_recipe(name, images_root)
    started = time.monotonic()
    if recipe.kind == "registry":
        existing = find_base(name, engine, images_root=images_root)
        if existing:
            return existing
        image = registry.ensure_pulled(recipe, engine)
        return BaseImage(name, recipe.reference, image.id, True, time.monotonic() - started)
    with _recipe_lock(recipe):  # two processes must not debootstrap the same recipe at once
        existing = None if force else find_base(name, engine, images_root=images_root)
        if existing:
            return existing
        image_id = _build_debootstrap(recipe, engine)
    return BaseImage(name, recipe.tag, image_id, True, time.monotonic() - started)


def _host_base(name: str, engine: Engine) -> BaseImage:
    image = engine.host_base(name)
    return BaseImage(name=name, tag=image.tags[0], id=image.id)


def _build_debootstrap(recipe: Recipe, engine: Engine) -> str:
    debootstrap.require_root_and_debootstrap()
    require_free_space(paths.home(), BASE_MIN_FREE_BYTES, f"building base image {recipe.name}")
    workdir = debootstrap.make_workdir(recipe)
    log_path = paths.home() / "logs" / f"base-{recipe.name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.write_text("")
    try:
        tarball = debootstrap.build_rootfs_tarball(recipe, workdir, log_path)
        record = debootstrap.base_record(tarball)
        labels = {LABEL_RECIPE: recipe.name, LABEL_RECIPE_HASH: recipe.content_hash}
        released = (record.get("debian_release") or {}).get("date")
        if released:
            labels[LABEL_DEBIAN_RELEASE] = released
        tool = record.get("tool") or {}
        if tool.get("name"):
            labels[LABEL_BASE_TOOL] = f"{tool['name']} {tool.get('version') or ''}".strip()
        try:
            image = engine.import_rootfs(tarball, recipe.tag, env=dict(sorted(recipe.env.items())), labels=labels,
                                         cmd=list(recipe.cmd) if recipe.cmd else None)
            _keep_record(record, image)
            return image.id
        except EngineError as exc:
            raise UserError(
                f"docker import of base image {recipe.name} failed: {exc}",
                "check free disk space under the Docker root and `runner doctor`",
            ) from None
    finally:
        debootstrap.remove_workdir(workdir)


def base_records_dir() -> Path:
    return paths.home() / "base-images"


def _keep_record(record: dict, image: ImageInfo) -> None:
    """``RUNNER_HOME/base-images/<layer digest>.json``: the packages and versions this build
    resolved, the Debian Release it came from, and its layer digest (what drift compares)."""
    record = {**record, "image_id": image.id, "layers": list(image.layers)}
    folder = base_records_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{record['layer'].replace('sha256:', '')}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


def base_build_record(layer: str) -> dict | None:
    """The record kept when a base image with this layer digest was built here, if any."""
    try:
        return json.loads((base_records_dir() / f"{layer.replace('sha256:', '')}.json").read_text())
    except (OSError, ValueError):
        return None


@contextmanager
def _recipe_lock(recipe: Recipe):
    lock_dir = paths.home() / "locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / f"base-{recipe.name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)

