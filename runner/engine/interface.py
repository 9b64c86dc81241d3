"""The engine seam: every operation the runner asks of a container engine, and the small
types that cross it. Nothing above ``runner/engine`` talks to an engine any other way.

An engine is a subclass of ``Engine`` named by a row of ``runner.engine.kinds.ENGINES``;
``runner.engine.get_engine()`` opens the one in use. ``runner.engine.docker_api.DockerApiEngine``
serves Docker and Podman (both speak the Docker Engine API); an engine with no daemon
(Charliecloud) subclasses ``runner.engine.process.ProcessEngine``, where the runner keeps the
containers itself. docs/engines.md maps each, and Apptainer, onto these operations.

What crosses the seam is plain data: a ``ContainerSpec`` (what to run and how it is locked
down) goes in, a ``Container`` handle, an ``ImageInfo``, a ``ContainerState`` come out.
Failures are ``EngineError`` (``NotFound``, ``Conflict``, ``BuildFailed``, ``TimedOut``):
the engine's own words, for the caller to judge. An operation an engine cannot do at all
raises ``Unsupported``, a ``UserError`` naming the engine and the fix.
"""

from __future__ import annotations

import abc
import shlex
from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from runner.errors import RunnerError, UserError

CONTAINER_USER = "1000:1000"
# What every entry container gets beside no network, user, capabilities and a read-only root.
TMPFS = {"/scratch": "rw,size=2g,mode=1777", "/tmp": "rw,size=512m,mode=1777"}
SHM_SIZE = "1g"
PIDS_LIMIT = 4096
DOCKER_API = "runner.engine.docker_api:DockerApiEngine"


# -- which engine ----------------------------------------------------------------------------
@dataclass(frozen=True)
class EngineKind:
    """A row of ``runner.engine.kinds.ENGINES``: an engine and the ``Engine`` class serving it."""

    name: str
    base_url: str | None  # the API socket; None: DOCKER_HOST, else Docker's default socket
    daemon: str  # the binary that serves the API (or runs the containers)
    packages: tuple[str, ...]  # what `runner setup` installs (Debian names)
    # What the engine needs on every container the runner creates (None / () for nothing).
    runtime: str | None = None
    ulimits: tuple[tuple[str, int, int], ...] = ()  # (name, soft, hard)
    implementation: str = DOCKER_API  # "module:class", the runner.engine.interface.Engine that serves it

    def cli_options(self) -> list[str]:
        """``DockerApiEngine``'s per-container options as ``docker run``/``podman run`` flags."""
        return ([f"--runtime={self.runtime}"] if self.runtime else []) + \
            [f"--ulimit={name}={soft}:{hard}" for name, soft, hard in self.ulimits]


# -- what goes in ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Mount:
    host: Path
    container: str
    read_only: bool = True


@dataclass(frozen=True)
class Confinement:
    """How a container is locked down. The default is the run contract's (docs/run-contract.md):
    a non-root user, a read-only root with tmpfs scratch, every capability dropped and
    no-new-privileges, a shared-memory size and a process limit. Every container has no
    network unless its spec names one."""

    user: str | None = CONTAINER_USER  # None: the image's own user
    read_only: bool = True
    tmpfs: tuple[tuple[str, str], ...] = tuple(TMPFS.items())  # (path, mount options)
    drop_capabilities: bool = True  # every capability dropped, and no-new-privileges
    shm_size: str | None = SHM_SIZE  # None: the engine's default
    pids_limit: int | None = PIDS_LIMIT  # None: the engine's default


LOCKED_DOWN = Confinement()
# The fingerprint's software probe: locked down, as the image's own user, a small /tmp.
READ_ONLY_PROBE = Confinement(user=None, tmpfs=(("/tmp", "rw,size=64m"),), shm_size=None, pids_limit=None)
# The SBOM's package listing: the image as it is (python3 and dpkg-query as its own user).
AS_BUILT = Confinement(user=None, read_only=False, tmpfs=(), drop_capabilities=False, shm_size=None,
                       pids_limit=None)


@dataclass
class ContainerSpec:
    image: str
    command: list[str]
    mounts: list[Mount]
    env: dict[str, str] = field(default_factory=dict)
    workdir: str | None = "/entry"  # None: the image's own
    cpus: float | None = None
    memory: str | int | None = None
    gpus: int = 0
    timeout_s: float = 3600
    label: str = "train"  # the container's role, in its owner labels (runner.engine.labels)
    entrypoint: list[str] | None = None  # overrides the image's ENTRYPOINT (the launcher)
    # Multi-process runs only. On one host, every rank joins rank 0's network namespace
    # (``network_of``: rank 0's name), which has no interface but loopback: the ranks reach
    # each other on 127.0.0.1 and nothing else. Across nodes, the cluster's internal network
    # (``network``) and a name the other nodes resolve. Each rank: one core, its GPU ids.
    # Otherwise: no network at all.
    network: str | None = None
    network_of: str | None = None
    name: str | None = None
    core: int | None = None
    gpu_ids: list[str] | None = None
    # The CPU weight against the other containers (the engine's default: 1024). The evaluator
    # starts beside the entry at the lowest weight, so it takes only cycles the entry leaves idle.
    cpu_shares: int | None = None
    confinement: Confinement = LOCKED_DOWN
    labels: dict[str, str] = field(default_factory=dict)  # beside the owner labels


# -- what comes out --------------------------------------------------------------------------
@dataclass(frozen=True)
class LayerSpec:
    """What ``Engine.install_layer`` runs: ``command`` (argv, run as root with no network),
    the folder its inputs are mounted at (read-only), and the one folder it writes that
    becomes the layer."""

    command: tuple[str, ...]
    inputs_at: str
    output: str

    @property
    def shell_command(self) -> str:
        """``command`` as one shell line (a Dockerfile ``RUN``)."""
        return " ".join(shlex.quote(word) for word in self.command)


@dataclass(frozen=True)
class EngineVersion:
    version: str
    api: str


@dataclass(frozen=True)
class ImageInfo:
    id: str  # the engine's image id ("sha256:...")
    tags: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    layers: tuple[str, ...] = ()  # each layer's content digest (uncompressed), oldest first


@dataclass(frozen=True)
class ContainerState:
    """``status`` in the Docker API's words: created, running, paused, restarting, removing,
    exited or dead (another engine maps its own onto them). ``pid``: the container's first
    process on the host (0 when none runs)."""

    status: str
    pid: int = 0
    exit_code: int | None = None


@dataclass(frozen=True, eq=False)
class Container:
    """A handle on one container of ``engine``; its methods are the engine's operations on it."""

    id: str
    name: str
    engine: Engine = field(repr=False)
    labels: Mapping[str, str] = field(default_factory=dict)
    created: str = ""  # the engine's creation stamp (sorts in time order)

    def start(self) -> None:
        self.engine.start(self)

    def freeze(self) -> None:
        self.engine.freeze(self)

    def thaw(self) -> None:
        self.engine.thaw(self)

    def state(self) -> ContainerState:
        return self.engine.state(self)

    def stop(self) -> None:
        self.engine.stop(self)

    def remove(self) -> None:
        self.engine.remove(self)


@dataclass(frozen=True)
class Finished:
    """A short container run to its end (``Engine.run``)."""

    exit_code: int | None
    stdout: bytes
    stderr: bytes


@dataclass(frozen=True)
class NetworkInfo:
    name: str
    internal: bool  # no gateway, no route out


# -- failures --------------------------------------------------------------------------------
class EngineError(RunnerError):
    """The engine refused or failed an operation; the message is its own explanation."""

    default_fix = "check that the container engine is running and not hung (`runner doctor`), then run the command again"


class NotFound(EngineError):
    """No such image, container or network (a container may have been removed meanwhile)."""

    default_fix = ("rebuild the entry if its image is gone (`runner build`), check the engine's state "
                   "(`runner doctor`), and run the command again")


class Conflict(EngineError):
    """The container is not in a state for that (not running, already being removed)."""

    default_fix = ("let the engine's other operation on the container end (or remove the container), "
                   "then run the command again")


class TimedOut(EngineError):
    """The container did not end within the time given."""

    default_fix = "check that the engine is not hung (`runner doctor`), then run the command again"


class BuildFailed(EngineError):
    """A step of an image build failed; the message is the builder's error."""

    default_fix = ("correct the entry's build step that failed (its Dockerfile or requirements.lock), "
                   "then `runner build` it again")


class Unsupported(UserError):
    """An operation this engine cannot do: one line naming the engine and the fix."""

    def __init__(self, engine: str, operation: str, fix: str):
        super().__init__(f"the {engine} engine cannot {operation}", fix)


# -- the operations --------------------------------------------------------------------------
class Engine(abc.ABC):
    """One container engine. Operations marked optional refuse with ``Unsupported`` unless an
    engine implements them."""

    def __init__(self, kind: EngineKind):
        self.kind = kind

    @property
    def name(self) -> str:
        return self.kind.name

    # reaching the engine
    @classmethod
    @abc.abstractmethod
    def connect(cls, kind: EngineKind, timeout: float) -> Engine:
        """A handle on the engine; it need not answer yet (``ping``)."""

    @classmethod
    @abc.abstractmethod
    def open(cls, kind: EngineKind) -> Engine:
        """A handle on an engine that answers, else a ``UserError`` saying how to get one."""

    @classmethod
    @abc.abstractmethod
    def setup(cls, kind: EngineKind, install: bool) -> Engine:
        """``runner setup``: start the engine (and with ``install``, install it) where needed."""

    @classmethod
    def check_host(cls, kind: EngineKind) -> None:
        """Refuse (``UserError``) a host setting that names this engine wrongly (a malformed
        ``DOCKER_HOST``), before anything tries to reach it. Most engines need no setting."""
        return None

    @classmethod
    def unreachable(cls, kind: EngineKind, error: BaseException) -> tuple[str, str]:
        """(problem, fix) for an engine that did not answer: what is wrong and what to do."""
        return (f"the {kind.name} engine does not work here: {error}",
                f"run `sudo runner setup --engine {kind.name}` (`runner doctor` says what is missing)")

    def gpu_support(self, facts: dict) -> tuple[bool, str]:
        """(can this engine give NVIDIA GPUs to containers on this host, the fix when not),
        from its ``facts()``."""
        return False, f"the {self.name} engine cannot give GPUs to containers: run GPU entries with docker"

    @abc.abstractmethod
    def ping(self) -> bool: ...

    def close(self) -> None:  # noqa: B027 - optional: an engine without a connection has nothing to close
        """Let go of the connection (nothing to do for an engine without one)."""

    @abc.abstractmethod
    def version(self) -> EngineVersion: ...

    @abc.abstractmethod
    def facts(self) -> dict:
        """The fingerprint's engine section (``runner.fingerprint.docker_engine``): engine,
        product, version, api_version, os_type, storage_driver, cgroup_version, runtimes,
        default_runtime, nvidia_runtime. Raises ``EngineError`` when the engine does not answer."""

    @abc.abstractmethod
    def refusal(self) -> str | None:
        """Why this engine cannot give a run the runner's guarantees (it cannot freeze), or None."""

    def refusal_fix(self) -> str:
        """What to do about ``refusal()``'s answer."""
        return f"run the engine rootful (`sudo runner setup --engine {self.name}`), or on a cgroup v2 host"

    def data_root(self) -> Path | None:
        """The host folder the engine keeps images in, when local (its disk is the one a build fills)."""
        return None

    # Whether the images live under RUNNER_HOME, so every node that shares it sees an image built
    # on any of them: ``runner reproduce --slurm`` then builds once on the submit host, before the
    # tasks start, instead of letting each node build (or wait on another's build of) the same image.
    images_in_runner_home = False

    # Whether the entries run on this host's own root with its own packages (the host engine):
    # no base image, no build, no image to export; ``isolation`` says why such runs never count.
    own_root = False

    def host_base(self, recipe: str) -> ImageInfo:
        """An engine with ``own_root``: the base "image" every entry stands on (the host's own
        environment, by digest), in place of base recipe ``recipe``."""
        raise Unsupported(self.name, f"stand an entry on the host's environment instead of {recipe}",
                          "build the base image (`runner setup`)")

    def host_packages(self) -> list[tuple[str, str]]:
        """An engine with ``own_root``: the (name, version) of every Python distribution the
        entries' ``python3`` imports from."""
        raise Unsupported(self.name, "list the host's packages", "use the host engine")

    def isolation(self, image: str) -> str | None:
        """Why a run of ``image`` under this engine cannot count, in one line; None when the
        engine isolates it (the entry's own image, locked down)."""
        return None

    # images
    @abc.abstractmethod
    def image(self, ref: str) -> ImageInfo:
        """The image a tag or id names; ``NotFound`` when there is none."""

    def find_image(self, ref: str) -> ImageInfo | None:
        try:
            return self.image(ref)
        except NotFound:
            return None

    @abc.abstractmethod
    def build_image(self, context: Path, dockerfile: str, tag: str, *, build_args: Mapping[str, str],
                    labels: Mapping[str, str], no_cache: bool = False) -> Generator[str, None, None]:
        """Build ``context/dockerfile`` with no network, tagged ``tag``: the builder's output as
        it comes (an empty string for a sign of progress without text); a failing step raises
        ``BuildFailed`` with the builder's error. A generator: closing it stops a build that
        ran past its time."""

    def install_layer(self, base: str, inputs: Path, spec: LayerSpec, tag: str, *,
                      labels: Mapping[str, str]) -> Generator[str, None, None]:
        """Image ``tag``: ``base`` plus one layer, what ``spec.command`` writes under
        ``spec.output`` when run as root with no network and ``inputs`` read-only at
        ``spec.inputs_at``; the command's output as it comes (a failure raises ``BuildFailed``).
        A generator: closing it stops the work. This default builds it from a Dockerfile in two
        stages (``inputs`` sent as the context, ``spec.output`` copied into a clean stage);
        an engine that can run a container and commit it does less."""
        dockerfile = inputs / ".layer.Dockerfile"
        dockerfile.write_text(
            f"ARG BASE_IMAGE\nFROM ${{BASE_IMAGE}} AS work\nCOPY . {spec.inputs_at}/\n"
            f"RUN {spec.shell_command}\nFROM ${{BASE_IMAGE}}\nCOPY --from=work {spec.output} {spec.output}\n")
        return self.build_image(inputs, dockerfile.name, tag, build_args={"BASE_IMAGE": base}, labels=labels)

    @abc.abstractmethod
    def import_rootfs(self, tarball: Path, tag: str, *, env: Mapping[str, str], labels: Mapping[str, str],
                      cmd: list[str] | None = None) -> ImageInfo:
        """An image of one layer, the root file system in ``tarball``, tagged ``tag``."""

    def pull_image(self, reference: str) -> ImageInfo:
        """Optional: fetch ``reference`` (pinned by digest) from its registry."""
        raise Unsupported(self.name, f"pull {reference}", "build the base image from a Debian recipe instead")

    @abc.abstractmethod
    def image_files(self, ref: str) -> Generator[bytes, None, None]:
        """The image's file system as a tar stream, from the engine's own export (never from a
        program inside the image). Close the generator to let go of what it holds."""

    def export_image(self, ref: str) -> Iterator[bytes]:
        """Optional: the image as an archive another engine loads (``docker save``'s format)."""
        raise Unsupported(self.name, "export an image as an archive", "export it from a docker or podman host")

    def image_layers(self, ref: str) -> tuple[ImageInfo, Iterator[bytes]] | None:
        """Optional: the image (its layers' diff ids, oldest first) and its archive as ``docker
        save`` writes it, each layer's tar whole, for the inspection to read layer by layer and
        keep each layer's facts by its digest. None where the engine keeps no layers: the
        inspection then reads ``image_files``."""
        return None

    def image_layer_folders(self, ref: str) -> tuple[ImageInfo, list[Path]] | None:
        """Optional: the image (its layers' diff ids, oldest first) and each layer's folder in
        the engine's own store on this host, unpacked as the engine keeps it (overlay2:
        whiteouts as 0:0 character devices, opaque folders by the ``trusted.overlay.opaque``
        attribute), one per diff id; read in place, nothing exported. None where the engine
        cannot give them: the inspection then reads ``image_layers``."""
        return None

    @abc.abstractmethod
    def remove_image(self, ref: str) -> None: ...

    # containers
    @abc.abstractmethod
    def create(self, spec: ContainerSpec) -> Container:
        """Create (not start) the container ``spec`` describes, locked down as its confinement
        says, labelled with the runner's owner labels for ``spec.label`` (``labels.owned_labels``)."""

    @abc.abstractmethod
    def start(self, container: Container) -> None: ...

    @abc.abstractmethod
    def attach(self, container: Container) -> Iterator[bytes]:
        """The container's stdout and stderr, from its start, in chunks as they come (the caller
        splits lines). Call before ``start`` so nothing is missed."""

    @abc.abstractmethod
    def wait(self, container: Container, timeout: float) -> int | None:
        """Its exit code once it ended; ``TimedOut`` past ``timeout`` seconds."""

    @abc.abstractmethod
    def logs(self, container: Container) -> tuple[bytes, bytes]:
        """(stdout, stderr) of a container that ended."""

    @abc.abstractmethod
    def freeze(self, container: Container) -> None:
        """Stop every process of the container at once (the cgroup freezer), until ``thaw``."""

    @abc.abstractmethod
    def thaw(self, container: Container) -> None: ...

    @abc.abstractmethod
    def state(self, container: Container) -> ContainerState: ...

    def set_cpu_weight(self, container: Container, weight: int) -> None:  # noqa: B027 - optional, see below
        """Optional: change a running container's CPU weight (1024: the default). An engine that
        cannot leaves it as created: the evaluator is then only slower once the entry exited."""

    @abc.abstractmethod
    def stop(self, container: Container) -> None:
        """Kill it at once (SIGKILL to every process)."""

    @abc.abstractmethod
    def remove(self, container: Container) -> None:
        """Remove it, running or not; ``NotFound`` when gone, ``Conflict`` when being removed."""

    def run(self, spec: ContainerSpec) -> Finished:
        """Run ``spec`` to its end (at most ``spec.timeout_s``, then stopped: ``TimedOut``) and
        remove it."""
        container = self.create(spec)
        try:
            container.start()
            try:
                code = self.wait(container, spec.timeout_s)
            except TimedOut:
                container.stop()
                raise
            return Finished(code, *self.logs(container))
        finally:
            try:
                container.remove()
            except EngineError:
                pass

    # ownership
    @abc.abstractmethod
    def owned(self, run_id: str | None = None) -> list[Container]:
        """Every container the runner created on this engine (``labels.MANAGED_LABEL``), with its
        owner labels; ``run_id``: only that run's."""

    # networks
    def network(self, name: str) -> NetworkInfo:
        """Optional: the cluster network ``name`` a run spanning nodes joins (``NotFound``)."""
        raise Unsupported(self.name, "join a cluster network (a run spanning nodes)",
                          "run it with docker or podman (`sudo runner setup --engine docker`)")
