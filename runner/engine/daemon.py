"""Install and start ``dockerd`` (or Podman's API service) where none runs (Debian-like
hosts, as root): ``DockerApiEngine.setup``.

Used by ``runner setup`` and the test session: a fresh CI machine has no engine running.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import docker

from runner import paths
from runner.engine.client import ENGINE_WAIT_S, address, check_host, get_client, ping
from runner.engine.kinds import EngineKind, current
from runner.errors import UserError

APT_TIMEOUT_S = 15 * 60


def is_debian_like() -> bool:
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return False
    fields = dict(
        line.split("=", 1) for line in text.splitlines() if "=" in line
    )
    ids = {fields.get("ID", "").strip('"')} | set(fields.get("ID_LIKE", "").strip('"').split())
    return bool(ids & {"debian", "ubuntu"}) and shutil.which("apt-get") is not None


def apt_install(packages: list[str], log_path: Path) -> None:
    """``apt-get install -y PACKAGES`` (after ``apt-get update`` where the host's lists do not
    have them); UserError (with the log) on failure."""
    if os.geteuid() != 0:
        raise UserError(
            f"installing {' '.join(packages)} needs root",
            f"run `sudo runner setup`, or `sudo apt-get install -y {' '.join(packages)}`",
        )
    if not is_debian_like():
        raise UserError(
            f"{' '.join(packages)} is missing and this host is not Debian-like, so it cannot be installed automatically",
            "install it with your distribution's package manager",
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    log_path.parent.mkdir(parents=True, exist_ok=True)
    install = ["apt-get", "install", "-y", *packages]
    with log_path.open("ab") as log:
        # The host's package lists first (an update costs seconds and is needed only where
        # they are missing or stale): apt-get update and a second try where that fails.
        if _apt(install, log, env, log_path, fail=False):
            return
        for command in (["apt-get", "update"], install):
            _apt(command, log, env, log_path, fail=True)


def _apt(command: list[str], log, env: dict[str, str], log_path: Path, *, fail: bool) -> bool:
    """Run one apt-get command into ``log``: True when it succeeded; on failure False, or a
    UserError with ``fail``."""
    try:
        proc = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env, check=False,
                              timeout=APT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise UserError(f"`{' '.join(command)}` did not finish in time (log: {log_path})",
                        "check the host's apt mirror is reachable") from None
    if proc.returncode != 0 and fail:
        raise UserError(f"`{' '.join(command)}` failed (log: {log_path})",
                        "check the host's apt sources and network, then retry") from None
    return proc.returncode == 0


def start_dockerd(wait_s: float = ENGINE_WAIT_S) -> Path:
    """Start ``dockerd`` in the background (log under the runner home) and wait for it."""
    if os.geteuid() != 0:
        raise UserError("starting the Docker engine needs root", "run `sudo runner setup`")
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        raise UserError("dockerd is not installed", "run `sudo runner setup`")
    log_path = paths.home() / "logs" / "dockerd.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        # Its own session, so the engine outlives this process (and its terminal), and the
        # root folder: the engine outlives the folder it was started from too (a clone, a
        # temporary folder), and the processes it starts inherit its working directory.
        subprocess.Popen([dockerd], stdout=log, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, start_new_session=True, cwd="/")
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if ping(timeout=2):
            return log_path
        time.sleep(0.5)
    raise UserError(
        f"dockerd did not answer within {wait_s:.0f} s (log: {log_path})",
        "read the log; a stale /var/run/docker.pid or a missing kernel feature are common causes",
    )


def start_podman_service(base_url: str, wait_s: float = ENGINE_WAIT_S) -> Path:
    """Start Podman's Docker-compatible API service on ``base_url`` (rootful) and wait for it."""
    if os.geteuid() != 0:
        raise UserError("starting Podman's API service for the runner needs root (rootless Podman cannot pause "
                        "containers on a cgroup v1 host)", "run `sudo RUNNER_ENGINE=podman runner setup`")
    socket_path = Path(base_url.removeprefix("unix://"))
    socket_path.parent.mkdir(parents=True, exist_ok=True)
    log_path = paths.home() / "logs" / "podman-service.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        # In the root folder, as dockerd: each container's conmon starts in the service's
        # working directory and fails ("Failed to get working directory") once it is deleted.
        subprocess.Popen(["podman", "system", "service", "--time=0", base_url], stdout=log,
                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, cwd="/")
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if ping(timeout=2):
            return log_path
        time.sleep(0.5)
    raise UserError(f"Podman's API service did not answer on {base_url} within {wait_s:.0f} s (log: {log_path})",
                    "read the log; `podman info` shows what Podman lacks on this host")


def ensure_client(install: bool = True, engine: EngineKind | None = None) -> docker.DockerClient:
    """A client for a running engine; with ``install``, install ``docker.io`` and start
    ``dockerd`` first when needed (Debian-like, root). Otherwise the one-line error."""
    engine = engine or current()
    check_host(engine)  # a malformed DOCKER_HOST is the user's to correct, not an engine to start
    if not engine.base_url and os.environ.get("DOCKER_HOST"):
        # Starting a local dockerd would not help (and would be a second engine): the user
        # asked for that engine, so it answers, or get_client says what is wrong with it.
        return get_client(engine)
    if ping():
        return get_client(engine)
    if engine.name == "podman":
        if not install:
            return get_client(engine)
        if shutil.which("podman") is None:
            apt_install(list(engine.packages), paths.home() / "logs" / "apt.log")
        start_podman_service(address(engine))  # Podman's kind names its socket
        return get_client(engine)
    if not install:
        return get_client(engine)  # raises the UserError with the fix
    if shutil.which("dockerd") is None:
        apt_install(["docker.io"], paths.home() / "logs" / "apt.log")
    start_dockerd()
    return get_client(engine)
