"""Registry-pinned base images: present locally, or pulled by digest, or a clear error."""

from __future__ import annotations

import docker
import docker.errors

from runner.errors import UserError
from runner.images.recipe import Recipe


def ensure_pulled(recipe: Recipe, client: docker.DockerClient) -> docker.models.images.Image:
    try:
        return client.images.get(recipe.reference)
    except docker.errors.ImageNotFound:
        pass
    try:
        return client.images.pull(recipe.reference)
    except (docker.errors.APIError, docker.errors.DockerException) as exc:
        reason = getattr(exc, "explanation", None) or str(exc)
        raise UserError(
            f"base image '{recipe.name}' is {recipe.reference}, which is not on this host "
            f"and could not be pulled ({reason.strip().splitlines()[0][:200]})",
            f"on a host with registry access run `docker pull {recipe.reference}`, or "
            f"`docker save` it elsewhere and `docker load` it here",
        ) from None
