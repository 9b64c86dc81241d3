"""The Docker engine: is one reachable, and (on Debian-like hosts, as root) install or
start it when it is not."""

from runner.engine.client import ENGINE_WAIT_S, engine_version, get_client, ping
from runner.engine.daemon import ensure_engine
from runner.engine.disk import free_bytes, require_free_space

__all__ = [
    "ENGINE_WAIT_S",
    "engine_version",
    "ensure_engine",
    "free_bytes",
    "get_client",
    "ping",
    "require_free_space",
]
