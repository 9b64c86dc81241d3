"""The container engine: its version, and whether the NVIDIA container runtime is installed
(the fingerprint's ``docker`` section, whatever the engine: ``Engine.facts``)."""

from __future__ import annotations

from runner.engine.interface import Engine, EngineError
from runner.engine.kinds import connect_engine

CONNECT_TIMEOUT_S = 10


def capture_docker(engine: Engine | None = None) -> dict:
    """The engine's facts (``Engine.facts``): of ``engine``, else of the one in use.

    An unreachable engine is a fact about the host, not a failure of fingerprinting:
    the fields are null and ``note`` says why.
    """
    try:
        if engine is None:
            engine = connect_engine(CONNECT_TIMEOUT_S)
        return engine.facts()
    except (EngineError, OSError) as err:
        return {
            "version": None, "api_version": None, "runtimes": [], "default_runtime": None,
            "nvidia_runtime": None, "note": f"Docker engine unreachable: {err}",
        }
