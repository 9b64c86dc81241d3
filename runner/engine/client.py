"""The Docker API's client (``runner.engine.docker_api``): connect to the engine's socket, or
say in one line how to get one answering.

Every request has a time-out: reaching the engine (its version, a ping) answers at once from
a running engine, so ``CONNECT_TIMEOUT_S`` bounds it; the requests after it (a build step
installing torch, an image export) get ``REQUEST_TIMEOUT_S`` between two reads. When the
engine does not answer, the error names the engine, its socket, what is wrong with it (no
socket there, not a socket, permission denied, nothing listening, silent) and what to check.
"""

from __future__ import annotations

import os
import shutil
import stat
import socket

import docker
import docker.errors
import requests.exceptions
from docker.utils import parse_host

from runner.engine.kinds import EngineKind, chosen, current
from runner.errors import UserError
from runner.safe_read import visible

ENGINE_WAIT_S = 60
# Reaching the engine (API version, ping): a running engine answers these at once.
CONNECT_TIMEOUT_S = 5
# Per-request read timeout after that: long enough for a silent build step (pip installing torch).
REQUEST_TIMEOUT_S = 900
DEFAULT_SOCKET = "unix:///var/run/docker.sock"
SCHEMES = ("unix", "tcp", "ssh", "http", "https")


def address(engine: EngineKind | None = None) -> str:
    """The socket ``engine`` (default: the one in use) is reached on, as a URL."""
    engine = engine or current()
    return engine.base_url or os.environ.get("DOCKER_HOST", "").strip() or DEFAULT_SOCKET


def check_host(engine: EngineKind | None = None) -> None:
    """A ``DOCKER_HOST`` the SDK cannot use is the user's to correct, not an engine to start."""
    engine = engine or current()
    value = os.environ.get("DOCKER_HOST", "").strip()
    if engine.base_url or not value:
        return
    scheme = value.partition("://")[0] if "://" in value else ""
    try:
        if scheme and scheme not in SCHEMES:
            raise docker.errors.DockerException(f"its scheme {scheme!r} is not one of {', '.join(SCHEMES)}")
        parse_host(value)
    except docker.errors.DockerException as exc:
        reason = str(exc).split("\n")[0][:160]
        raise UserError(f"DOCKER_HOST={visible(value)[:120]} is malformed ({visible(reason)})",
                        f"unset DOCKER_HOST to use this host's engine, or set it to {DEFAULT_SOCKET} "
                        "(or tcp://HOST:2376, ssh://USER@HOST)") from None


def connect(timeout: float, engine: EngineKind | None = None) -> docker.DockerClient:
    """A client of ``engine`` (default: the one in use, ``runner.engine.kinds``): its socket,
    else DOCKER_HOST. Reaching it (the API version the SDK asks first) waits at most
    ``CONNECT_TIMEOUT_S``; each request after that, ``timeout``."""
    engine = engine or current()
    check_host(engine)
    first = min(timeout, CONNECT_TIMEOUT_S)
    if engine.base_url:
        client = docker.DockerClient(base_url=engine.base_url, timeout=first)
    else:
        client = docker.from_env(timeout=first)
    client.api.timeout = timeout
    return client


def ping(timeout: float = 5) -> bool:
    try:
        client = connect(timeout)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (docker.errors.DockerException, UserError, OSError):
        return False


def get_client(engine: EngineKind | None = None) -> docker.DockerClient:
    """A client for the engine (DOCKER_HOST or the local socket); UserError if none answers,
    naming the engine, its socket and what to check."""
    engine = engine or current()
    try:
        client = connect(REQUEST_TIMEOUT_S, engine)
        client.api.timeout = CONNECT_TIMEOUT_S
        client.ping()
        client.api.timeout = REQUEST_TIMEOUT_S
        return client
    except (docker.errors.DockerException, OSError) as exc:
        raise UserError(*unreachable(engine, exc)) from None


def timed_out(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or what caused it) is a read or connect time-out."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, (requests.exceptions.Timeout, socket.timeout, TimeoutError)):
            return True
        if "timed out" in str(exc).lower():
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _socket_problem(path: str) -> tuple[str, bool] | None:
    """What is wrong with the unix socket at ``path`` (and whether it is the user's access),
    None when it looks usable."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return f"there is no socket at {path}", False
    except PermissionError:
        return f"{path} cannot be reached (permission denied on its folder)", True
    except OSError as exc:
        return f"{path} cannot be reached ({exc.strerror})", False
    if not stat.S_ISSOCK(st.st_mode):
        return f"{path} is not a socket", False
    if not os.access(path, os.R_OK | os.W_OK):
        return f"you may not use the socket {path} (permission denied)", True
    return None


def _what(url: str, exc: BaseException) -> tuple[str, str | None]:
    """(what is wrong with the engine at ``url``, in words; "access", "absent" or None: the
    kind of fix it needs)."""
    if timed_out(exc):
        return f"it accepted the connection and did not answer in {CONNECT_TIMEOUT_S} s", None
    refused = "refused" in str(exc).lower()
    if url.startswith(("unix://", "http+unix://")):
        path = url.split("://", 1)[1] or "/var/run/docker.sock"
        problem = _socket_problem(path)
        if problem is not None:
            what, access = problem
            return what, "access" if access else "absent"
        if refused:
            return f"nothing listens on {path} (the engine is not running)", "absent"
    elif refused:
        return "the connection was refused (nothing listens there)", "absent"
    return f"it is not reachable ({visible(str(exc).split(chr(10))[0][:160])})", None


ACCESS_FIX = ("add your user to the group that owns the socket (`sudo usermod -aG docker $USER`, then log in "
              "again), or run the runner as root")


def unreachable(engine: EngineKind, exc: BaseException) -> tuple[str, str]:
    """(problem, fix) for an engine that did not answer: which engine, which socket, what is
    actually wrong and what to check."""
    url = visible(address(engine))
    what, kind = _what(address(engine), exc)
    if engine.name == "podman":
        name = f"Podman (chosen by {chosen()[1]})"
        if shutil.which(engine.daemon) is None:
            return (f"{name} is not installed",
                    "install and start it with `sudo runner setup --engine podman`, or choose docker")
        fix = ACCESS_FIX if kind == "access" else (
            "start it with `sudo runner setup --engine podman` (`podman system service`)"
            + ("; if it runs, check it is not hung (`runner doctor`)" if kind is None else ""))
        return f"{name} does not answer on {url}: {what}", fix
    if not engine.base_url and os.environ.get("DOCKER_HOST", "").strip():
        # The user asked for that engine: what is wrong with it, never a second engine.
        problem = f"no Docker engine is reachable: DOCKER_HOST={url} points at an unreachable engine ({what})"
        fix = ACCESS_FIX if kind == "access" else (
            "start the engine it names (check it is running and not hung: `runner doctor`), correct DOCKER_HOST, "
            "or unset it to use (and let `sudo runner setup` start) this host's own engine")
        return problem, fix
    problem = f"no Docker engine is reachable: docker at {url}: {what}"
    if kind == "access":
        return problem, ACCESS_FIX
    if kind == "absent" and shutil.which(engine.daemon) is None:
        return (f"{problem}; Docker is not installed", "install and start it with `sudo runner setup` "
                "(Debian/Ubuntu), or install Docker Engine from docs.docker.com/engine/install")
    return problem, ("start it with `sudo runner setup` (or `sudo systemctl start docker`)"
                     + ("; if it runs, check it is not hung (`runner doctor`)" if kind is None else ""))
