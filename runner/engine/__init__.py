"""The container engine: the ``Engine`` interface every stage is given (``interface``), the
engines the runner knows (``kinds``: Docker and Podman, served by ``docker_api``; Charliecloud,
with no daemon, by ``charliecloud`` over ``process`` and ``cgroups``), whether
one is reachable, and (on Debian-like hosts, as root) installing or starting it when not."""

from runner.engine.disk import free_bytes, require_free_space
from runner.engine.interface import Container, ContainerSpec, Engine, EngineError, Mount, NotFound
from runner.engine.kinds import connect_engine, ensure_engine, get_engine

__all__ = [
    "Container",
    "ContainerSpec",
    "Engine",
    "EngineError",
    "Mount",
    "NotFound",
    "connect_engine",
    "ensure_engine",
    "free_bytes",
    "get_engine",
    "require_free_space",
]
