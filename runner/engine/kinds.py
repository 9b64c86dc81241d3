"""Which container engine runs the entries: the registry a second engine plugs into.

Every operation the runner needs of an engine is a method of ``runner.engine.interface.Engine``
(image: build with no network, import a root file system, list its files, export, inspect;
container: create from a spec, start, freeze, thaw, state, stream its output, stop, remove;
ownership: the runner's own containers; networks for a run spanning nodes). Each row of
``ENGINES`` below names an engine and the ``Engine`` subclass that serves it: Docker and
Podman both speak the Docker Engine API (``dockerd``; Podman's ``podman system service``), so
one class, ``runner.engine.docker_api.DockerApiEngine``, serves both; Charliecloud has no
daemon and is served by ``runner.engine.charliecloud.CharliecloudEngine``. A new engine is one
module under ``runner/engine`` and one row here (docs/engines.md, "Adding an engine").

A row names the socket its API listens on, the program that serves it (what ``runner setup``
installs and starts), and what it adds to every container: Podman 4.3 on a cgroup v1 host
needs the ``runc`` runtime and explicit ulimits (its default ``crun`` fails there with
"setrlimit RLIMIT_NOFILE: Operation not permitted"). ``RUNNER_ENGINE`` picks one (else what
``runner setup --engine`` chose, else ``docker``); the engine in use is recorded in every
fingerprint.
"""

from __future__ import annotations

import importlib
import os

from runner import paths
from runner.engine.interface import DOCKER_API, Engine, EngineKind
from runner.errors import UserError

__all__ = ["DOCKER_API", "ENGINES", "ENV_VAR", "EngineKind", "choose", "chosen", "connect_engine", "current",
           "ensure_engine", "get_engine", "implementation"]

ENV_VAR = "RUNNER_ENGINE"

ENGINES: dict[str, EngineKind] = {
    "docker": EngineKind("docker", None, "dockerd", ("docker.io",)),
    "podman": EngineKind("podman", "unix:///run/podman/podman.sock", "podman", ("podman",),
                         runtime="runc", ulimits=(("nofile", 1024, 1024), ("nproc", 4096, 4096))),
    # No daemon: ch-image builds into a folder, ch-run runs a process tree the runner keeps
    # in cgroups and namespaces of its own (runner.engine.process).
    "charliecloud": EngineKind("charliecloud", None, "ch-run", ("charliecloud-runtime", "charliecloud-builders"),
                               implementation="runner.engine.charliecloud:CharliecloudEngine"),
    # No image: the entry runs with this host's Python environment, in bubblewrap and cgroups
    # the runner owns (runner.engine.host); its results never count.
    "host": EngineKind("host", None, "bwrap", ("bubblewrap",), implementation="runner.engine.host:HostEngine"),
}


def _chosen_file():
    return paths.home() / "engine"


def choose(name: str) -> EngineKind:
    """Make ``name`` this host's engine for later commands (``runner setup --engine``)."""
    engine = ENGINES.get(name)
    if engine is None:
        raise UserError(f"no engine named {name!r}", f"use one of: {', '.join(ENGINES)}")
    path = _chosen_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(name + "\n")
    os.environ[ENV_VAR] = name
    return engine


def chosen() -> tuple[str, str]:
    """(engine name, what chose it): ``RUNNER_ENGINE``, else the home's engine file that
    ``runner setup --engine`` wrote, else docker by default. Errors name the chooser."""
    name = os.environ.get(ENV_VAR, "").strip().lower()
    if name:
        return name, f"{ENV_VAR}={name}"
    path = _chosen_file()
    try:
        name = path.read_text().strip().lower()
    except OSError:
        name = ""
    return (name, f"the engine file {path}") if name else ("docker", "the default")


def current() -> EngineKind:
    """The engine this process uses: ``RUNNER_ENGINE``, else the one ``runner setup --engine``
    chose on this host, else docker."""
    name, chooser = chosen()
    try:
        return ENGINES[name]
    except KeyError:
        if chooser.startswith(ENV_VAR):
            raise UserError(f"{ENV_VAR}={name!r} names no engine the runner knows",
                            f"set {ENV_VAR} to one of: {', '.join(ENGINES)}") from None
        raise UserError(f"{chooser} names {name[:40]!r}, no engine the runner knows",
                        f"run `sudo runner setup --engine ENGINE` with one of: {', '.join(ENGINES)} "
                        f"(or delete {_chosen_file()} for docker)") from None


def implementation(kind: EngineKind) -> type[Engine]:
    """The ``Engine`` subclass a row names (imported by name: each implementation imports this
    registry, and only the one in use is loaded)."""
    module, _, name = kind.implementation.partition(":")
    return getattr(importlib.import_module(module), name)


def get_engine() -> Engine:
    """The engine in use, answering; else a ``UserError`` saying how to get it running."""
    kind = current()
    return implementation(kind).open(kind)


def connect_engine(timeout: float) -> Engine:
    """The engine in use, whether or not it answers (``Engine.ping``)."""
    kind = current()
    return implementation(kind).connect(kind, timeout)


def ensure_engine(install: bool = True) -> Engine:
    """``runner setup``: the engine in use, started (with ``install``, installed first) where
    needed; otherwise the one-line error saying how."""
    kind = current()
    return implementation(kind).setup(kind, install)
