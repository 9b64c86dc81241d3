"""Connect to the engine, or say in one line how to get one."""

from __future__ import annotations

import shutil

import docker
import docker.errors

from runner.errors import UserError

ENGINE_WAIT_S = 60
# Per-request read timeout: long enough for a silent build step (pip installing torch).
REQUEST_TIMEOUT_S = 900


def connect(timeout: float) -> docker.DockerClient:
    """A client of the engine in use (``runner.engine.kinds``): its socket, else DOCKER_HOST."""
    from runner.engine.kinds import current

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
    try:
        client = connect(REQUEST_TIMEOUT_S)
        client.ping()
        return client
    except (docker.errors.DockerException, OSError) as exc:
        installed = shutil.which("dockerd") is not None
        fix = (
            "start it with `sudo runner setup` (or `sudo systemctl start docker`)"
            if installed
            else "install and start it with `sudo runner setup` (Debian/Ubuntu), "
            "or install Docker Engine from docs.docker.com/engine/install"
        )
        reason = str(exc).split("\n")[0][:160]
        raise UserError(f"no Docker engine is reachable ({reason})", fix) from None


def engine_version(client: docker.DockerClient) -> dict[str, str]:
    info = client.version()
    return {"version": info.get("Version", "?"), "api": info.get("ApiVersion", "?")}
