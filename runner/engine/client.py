"""Connect to the engine, or say in one line how to get one."""

from __future__ import annotations

import shutil

import docker
import docker.errors

from runner.engine.kinds import chosen, current
from runner.errors import UserError

ENGINE_WAIT_S = 60
# Per-request read timeout: long enough for a silent build step (pip installing torch).
REQUEST_TIMEOUT_S = 900


def connect(timeout: float) -> docker.DockerClient:
    """A client of the engine in use (``runner.engine.kinds``): its socket, else DOCKER_HOST."""
    engine = current()
    if engine.base_url:
        return docker.DockerClient(base_url=engine.base_url, timeout=timeout)
    return docker.from_env(timeout=timeout)


def ping(timeout: float = 5) -> bool:
    try:
        client = connect(timeout)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (docker.errors.DockerException, OSError):
        return False


def get_client() -> docker.DockerClient:
    """A client for the engine (DOCKER_HOST or the local socket); UserError if none answers."""
    engine = current()
    try:
        client = connect(REQUEST_TIMEOUT_S)
        client.ping()
        return client
    except (docker.errors.DockerException, OSError) as exc:
        reason = str(exc).split("\n")[0][:160]
        if engine.name == "podman":
            raise UserError(*_podman_unreachable(engine, reason)) from None
        installed = shutil.which("dockerd") is not None
        fix = (
            "start it with `sudo runner setup` (or `sudo systemctl start docker`)"
            if installed
            else "install and start it with `sudo runner setup` (Debian/Ubuntu), "
            "or install Docker Engine from docs.docker.com/engine/install"
        )
        raise UserError(f"no Docker engine is reachable ({reason})", fix) from None


def _podman_unreachable(engine, reason: str) -> tuple[str, str]:
    """Podman chosen, and its API service does not answer: the problem and the fix, naming
    what chose Podman (the user may not remember setting it)."""
    where = f"Podman (chosen by {chosen()[1]})"
    if shutil.which(engine.daemon) is None:
        return (f"{where} is not installed",
                "install and start it with `sudo runner setup --engine podman`, or choose docker")
    return (f"{where} does not answer on {engine.base_url}: its API service is not running ({reason})",
            "start it with `sudo runner setup --engine podman` (`podman system service`)")


def engine_version(client: docker.DockerClient) -> dict[str, str]:
    info = client.version()
    return {"version": info.get("Version", "?"), "api": info.get("ApiVersion", "?")}
