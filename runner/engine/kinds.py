"""Which container engine runs the entries: the seam a second engine plugs into.

What the runner needs of an engine, and where the code asks for it (every need goes
through the Docker Engine API, which ``dockerd`` serves and Podman's ``podman system
service`` serves too, so one client library talks to both):

| need | where |
|---|---|
| build an image from a context with no network | ``runner.entry_build.entry_image`` (``api.build``) |
| import a root file system as an image | ``runner.images`` (``api.import_image_from_file``) |
| create and run a container with limits, labels, mounts | ``runner.engine.containers`` |
| pause and unpause (the cgroup freezer) for evaluations | ``runner.run.training``, ``runner.run.evaluator`` |
| wait, logs, attach; list by label; remove | ``runner.engine.containers`` |
| an internal network with no route out | ``runner.run.multiprocess``, ``runner.run.allocation`` |
| an image's file system (audit, SBOM) | ``runner.entry_build.image_inspection``, ``runner.entry_build.sbom`` |

An ``Engine`` names the socket its API listens on, the daemon that serves it (what
``runner setup`` installs and starts), and what it adds to every container: Podman 4.3 on a
cgroup v1 host needs the ``runc`` runtime and explicit ulimits (its default ``crun`` fails
there with "setrlimit RLIMIT_NOFILE: Operation not permitted"). ``RUNNER_ENGINE`` picks one
(else what ``runner setup --engine`` chose, else ``docker``); the engine in use is recorded
in every fingerprint.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from runner import paths
from runner.errors import UserError

ENV_VAR = "RUNNER_ENGINE"


@dataclass(frozen=True)
class Engine:
    name: str
    base_url: str | None  # the API socket; None: DOCKER_HOST, else Docker's default socket
    daemon: str  # the binary that serves the API
    packages: tuple[str, ...]  # what `runner setup` installs (Debian names)
    # What the engine needs on every container the runner creates (None / () for nothing).
    runtime: str | None = None
    ulimits: tuple[tuple[str, int, int], ...] = ()  # (name, soft, hard)

    def cli_options(self) -> list[str]:
        """The same as ``create_options``, as ``docker run``/``podman run`` flags."""
        return ([f"--runtime={self.runtime}"] if self.runtime else []) + \
            [f"--ulimit={name}={soft}:{hard}" for name, soft, hard in self.ulimits]


ENGINES: dict[str, Engine] = {
    "docker": Engine("docker", None, "dockerd", ("docker.io",)),
    "podman": Engine("podman", "unix:///run/podman/podman.sock", "podman", ("podman",),
                     runtime="runc", ulimits=(("nofile", 1024, 1024), ("nproc", 4096, 4096))),
}


def _chosen_file():
    return paths.home() / "engine"


def choose(name: str) -> Engine:
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


def current() -> Engine:
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


def refusal(client) -> str | None:
    """Why the engine behind ``client`` cannot give a run the runner's guarantees, or None.
    A rootless engine on a cgroup v1 host cannot freeze containers (``pause`` needs the
    cgroup freezer it does not own): evaluations could not stop the entry."""
    info = client.info()
    rootless = any("rootless" in str(option) for option in info.get("SecurityOptions") or [])
    if rootless and str(info.get("CgroupVersion")) == "1":
        return (f"the {current().name} engine runs rootless on a cgroup v1 host, where it cannot pause "
                "containers: the runner could not freeze the entry for its evaluations")
    return None


def create_options() -> dict:
    """What the engine in use adds to ``containers.create``."""
    from docker.types import Ulimit  # lazy: heavy (docker)

    engine = current()
    options: dict = {"runtime": engine.runtime} if engine.runtime else {}
    if engine.ulimits:
        options["ulimits"] = [Ulimit(name=name, soft=soft, hard=hard) for name, soft, hard in engine.ulimits]
    return options
