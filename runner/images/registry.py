"""Registry-pinned base images: present locally, or pulled by digest, or a clear error."""

from __future__ import annotations

from runner.engine.interface import Engine, EngineError, ImageInfo
from runner.errors import UserError
from runner.images.recipe import Recipe


def ensure_pulled(recipe: Recipe, engine: Engine) -> ImageInfo:
    found = engine.find_image(recipe.reference)
    if found is not None:
        return found
    try:
        return engine.pull_image(recipe.reference)
    except EngineError as exc:
        reason = str(exc)
        raise UserError(
            f"base image '{recipe.name}' is {recipe.reference}, which is not on this host "
            f"and could not be pulled ({reason.strip().splitlines()[0][:200]})",
            f"on a host with registry access run `docker pull {recipe.reference}`, or "
            f"`docker save` it elsewhere and `docker load` it here",
        ) from None
