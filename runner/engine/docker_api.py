"""``DockerApiEngine``: the runner's engine operations through the Docker Engine API (the
``docker`` SDK), which ``dockerd`` serves and Podman's ``podman system service`` serves too.

The one place, with ``client.py`` (connecting) and ``daemon.py`` (installing and starting the
engine), that talks to the API: every failure leaves it as a ``runner.engine.interface``
error, every answer as one of its types.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Generator, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import docker
import docker.errors
import requests.exceptions
from docker.types import DeviceRequest, Ulimit

from runner.engine import client as api_client
from runner.engine import daemon, gpus
from runner.engine.containers import cpu_limits
from runner.engine.interface import (
    Conflict,
    BuildFailed,
    Container,
    ContainerSpec,
    ContainerState,
    Engine,
    EngineError,
    EngineKind,
    EngineVersion,
    ImageInfo,
    LayerSpec,
    NetworkInfo,
    NotFound,
    TimedOut,
)
from runner.engine.kinds import current
from runner.errors import UserError
from runner.engine.labels import LABEL_RUN, MANAGED_LABEL, owned_labels

EXPORT_CHUNK_BYTES = 1 << 20
# What the engine itself writes into every container it runs (Podman's diff names /etc and
# /run for them): never the command's doing, so not a change outside the layer's folder.
_ENGINE_FILES = frozenset({"/etc", "/etc/hosts", "/etc/hostname", "/etc/resolv.conf", "/run", "/run/.containerenv"})


@contextmanager
def _translated():
    """The SDK's exceptions (and the transport's) as the seam's."""
    try:
        yield
    except docker.errors.NotFound as exc:
        raise NotFound(exc.explanation or str(exc)) from exc
    except docker.errors.APIError as exc:
        raise (Conflict if exc.status_code == 409 else EngineError)(exc.explanation or str(exc)) from exc
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        if api_client.timed_out(exc):
            kind = current()
            raise EngineError(f"{kind.name} at {api_client.address(kind)} stopped answering (the request timed "
                              "out): check that the engine is running and not hung (`runner doctor`)") from exc
        raise EngineError(str(exc)) from exc


def _chunks(stream) -> Iterator:
    """``stream``'s items, with the SDK's exceptions translated; closing it closes ``stream``."""
    try:
        with _translated():
            yield from stream
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()


def create_options(kind: EngineKind | None = None) -> dict:
    """What the engine (default: the one in use) adds to every ``containers.create``."""
    kind = kind or current()
    options: dict = {"runtime": kind.runtime} if kind.runtime else {}
    if kind.ulimits:
        options["ulimits"] = [Ulimit(name=name, soft=soft, hard=hard) for name, soft, hard in kind.ulimits]
    return options


def refusal(info: dict, engine: str) -> str | None:
    """Why an engine whose ``info()`` is ``info`` cannot give a run the runner's guarantees.
    A rootless engine on a cgroup v1 host cannot freeze containers (``pause`` needs the
    cgroup freezer it does not own): evaluations could not stop the entry."""
    rootless = any("rootless" in str(option) for option in info.get("SecurityOptions") or [])
    if rootless and str(info.get("CgroupVersion")) == "1":
        return (f"the {engine} engine runs rootless on a cgroup v1 host, where it cannot pause "
                "containers: the runner could not freeze the entry for its evaluations")
    return None


def _image_info(image) -> ImageInfo:
    attrs = image.attrs or {}
    return ImageInfo(
        id=image.id,
        tags=tuple(image.tags),
        labels=dict((attrs.get("Config") or {}).get("Labels") or {}),
        layers=tuple((attrs.get("RootFS") or {}).get("Layers") or []),
    )


class DockerApiEngine(Engine):
    def __init__(self, kind: EngineKind, client: docker.DockerClient):
        super().__init__(kind)
        self.client = client

    # -- reaching the engine --------------------------------------------------------------
    @classmethod
    def connect(cls, kind: EngineKind, timeout: float) -> DockerApiEngine:
        try:
            with _translated():
                return cls(kind, api_client.connect(timeout, kind))
        except UserError as err:  # a malformed DOCKER_HOST: an engine this host cannot reach
            raise EngineError(str(err)) from None

    @classmethod
    def open(cls, kind: EngineKind) -> DockerApiEngine:
        return cls(kind, api_client.get_client(kind))

    @classmethod
    def setup(cls, kind: EngineKind, install: bool) -> DockerApiEngine:
        return cls(kind, daemon.ensure_client(install, kind))

    @classmethod
    def check_host(cls, kind: EngineKind) -> None:
        api_client.check_host(kind)

    @classmethod
    def unreachable(cls, kind: EngineKind, error: BaseException) -> tuple[str, str]:
        return api_client.unreachable(kind, error)

    def gpu_support(self, facts: dict) -> tuple[bool, str]:
        possible = gpus.gpu_containers_possible({"docker": {**facts, "engine": self.name}})
        if self.name == "podman":  # Podman takes GPUs as CDI devices
            return (possible, "install the NVIDIA Container Toolkit (nvidia-container-toolkit) and run "
                    "`nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml` (Podman takes GPUs as CDI devices)")
        return (possible, "install the NVIDIA Container Toolkit (nvidia-container-toolkit) and run "
                "`nvidia-ctk runtime configure --runtime=docker` and restart dockerd")

    def ping(self) -> bool:
        try:
            return bool(self.client.ping())
        except (docker.errors.DockerException, requests.exceptions.RequestException, OSError):
            return False

    def close(self) -> None:
        self.client.close()

    def version(self) -> EngineVersion:
        with _translated():
            info = self.client.version()
        return EngineVersion(info.get("Version", "?"), info.get("ApiVersion", "?"))

    def facts(self) -> dict:
        try:
            with _translated():
                version = self.client.version()
                info = self.client.info()
        except OSError as exc:
            raise EngineError(str(exc)) from exc
        runtimes = sorted(info.get("Runtimes") or {})
        components = {c.get("Name"): c.get("Version") for c in version.get("Components") or [] if isinstance(c, dict)}
        return {
            "engine": self.name,
            "product": "Podman Engine" if "Podman Engine" in components else "Docker Engine",
            "version": version.get("Version"),
            "api_version": version.get("ApiVersion"),
            "os_type": info.get("OSType"),
            "storage_driver": info.get("Driver"),
            "cgroup_version": info.get("CgroupVersion"),
            "runtimes": runtimes,
            "default_runtime": info.get("DefaultRuntime"),
            "nvidia_runtime": "nvidia" in runtimes,
            "note": None,
        }

    def refusal(self) -> str | None:
        with _translated():
            return refusal(self.client.info(), self.name)

    def data_root(self) -> Path | None:
        with _translated():
            return Path(self.client.info().get("DockerRootDir", "/var/lib/docker"))

    # -- images -----------------------------------------------------------------------------
    def image(self, ref: str) -> ImageInfo:
        with _translated():
            return _image_info(self.client.images.get(ref))

    def build_image(self, context: Path, dockerfile: str, tag: str, *, build_args: Mapping[str, str],
                    labels: Mapping[str, str], no_cache: bool = False) -> Generator[str, None, None]:
        with _translated():
            stream = self.client.api.build(
                path=str(context), dockerfile=dockerfile, tag=tag, buildargs=dict(build_args), labels=dict(labels),
                network_mode="none", nocache=no_cache, rm=True, forcerm=True, pull=False, decode=True,
            )
        return self._build_output(stream)

    @staticmethod
    def _build_output(stream) -> Generator[str, None, None]:
        for chunk in _chunks(stream):
            yield chunk.get("stream") or ""
            if "error" in chunk:
                raise BuildFailed(chunk["error"])

    def install_layer(self, base: str, inputs: Path, spec: LayerSpec, tag: str, *,
                      labels: Mapping[str, str]) -> Generator[str, None, None]:
        """A container of ``base`` runs the command with ``inputs`` bind-mounted read-only and no
        network, and is committed: the inputs are never copied into a layer, and ``spec.output``
        is written once (no second stage copying it). ``/tmp`` and ``/root`` are memory file
        systems, so nothing but what the command installs is committed; a change anywhere
        but under ``spec.output`` fails the build."""
        with _translated():
            cmd = (self.client.images.get(base).attrs.get("Config") or {}).get("Cmd") or ["python3"]
            container = self.client.containers.create(
                base, command=list(spec.command), entrypoint=[], user="0", network_mode="none",
                volumes={str(inputs): {"bind": spec.inputs_at, "mode": "ro"}},
                tmpfs={"/tmp": "", "/root": ""}, labels=owned_labels("layer-build"), **create_options(self.kind))
        return self._installed(container, spec, tag, cmd, labels)

    @staticmethod
    def _installed(container, spec: LayerSpec, tag: str, cmd: list[str],
                   labels: Mapping[str, str]) -> Generator[str, None, None]:
        try:
            with _translated():
                output = container.attach(stdout=True, stderr=True, stream=True, logs=True)
                container.start()
            pending = b""
            for chunk in _chunks(output):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    yield line.decode("utf-8", "replace") + "\n"
            if pending:
                yield pending.decode("utf-8", "replace")
            with _translated():
                code = container.wait().get("StatusCode")
            if code != 0:
                raise BuildFailed(f"{spec.shell_command} exited with {code}")
            with _translated():
                changed = [c["Path"] for c in container.diff() or []]
            outside = [p for p in changed if p != spec.output and not p.startswith(spec.output + "/")
                       and not spec.output.startswith(p + "/") and p not in _ENGINE_FILES]
            if outside:
                raise BuildFailed(f"the layer's command changed {', '.join(sorted(outside)[:5])} "
                                  f"outside {spec.output}")
            repository, name = tag.split(":", 1)
            # A commit keeps the container's own labels: its owner's are blanked, so no container
            # of the image reads as the runner's (an orphan to remove, a run's).
            blank = dict.fromkeys([*owned_labels("layer-build"), LABEL_RUN], "")
            changes = ["CMD [" + ", ".join(f'"{c}"' for c in cmd) + "]",  # one label a line: Podman reads one
                       *(f'LABEL {key}="{value}"' for key, value in {**blank, **labels}.items())]
            with _translated():
                # Podman's API reads the labels from the configuration, Docker's from either.
                container.commit(repository=repository, tag=name, changes=changes,
                                 conf={"Labels": {**blank, **labels}, "Cmd": list(cmd)})
        finally:
            with _translated():
                container.remove(force=True)

    def import_rootfs(self, tarball: Path, tag: str, *, env: Mapping[str, str], labels: Mapping[str, str],
                      cmd: list[str] | None = None) -> ImageInfo:
        repository, name = tag.split(":", 1)
        changes = [f"ENV {key}={value}" for key, value in env.items()]
        if labels:
            changes.append("LABEL " + " ".join(f'{key}="{value}"' for key, value in labels.items()))
        if cmd:
            changes.append("CMD [" + ", ".join(f'"{c}"' for c in cmd) + "]")
        with _translated():
            answer = self.client.api.import_image_from_file(str(tarball), repository=repository, tag=name,
                                                             changes=changes)
            return _image_info(self._imported(answer, tag))

    def _imported(self, answer, tag: str):
        """The image an import made, tagged ``tag``. Podman's API imports under ``latest`` whatever
        tag was asked for: its answer names the image id, which is then tagged as asked."""
        try:
            return self.client.images.get(tag)
        except docker.errors.ImageNotFound:
            pass
        text = answer if isinstance(answer, str) else b"".join(answer).decode() if answer else ""
        ids = re.findall(r"(?:sha256:)?([0-9a-f]{64})", text)
        if not ids:
            raise EngineError(f"the engine's answer to the import names no image: {text[:200]}")
        image = self.client.images.get(ids[-1])
        repository, name = tag.split(":", 1)
        image.tag(repository, name)
        return self.client.images.get(tag)

    def pull_image(self, reference: str) -> ImageInfo:
        with _translated():
            return _image_info(self.client.images.pull(reference))

    def image_files(self, ref: str) -> Generator[bytes, None, None]:
        # The engine exports a container's file system, not an image's: a created, never
        # started container of the image, removed once read.
        with _translated():
            container = self.client.containers.create(ref, command=["true"], network_mode="none", entrypoint=[],
                                                      labels=owned_labels("image-audit"),
                                                      **create_options(self.kind))
        try:
            with _translated():
                stream = container.export(chunk_size=EXPORT_CHUNK_BYTES)
        except BaseException:
            container.remove(force=True)
            raise
        return self._exported(container, stream)

    @staticmethod
    def _exported(container, stream) -> Generator[bytes, None, None]:
        try:
            yield from _chunks(stream)
        finally:
            with _translated():
                container.remove(force=True)

    def export_image(self, ref: str) -> Iterator[bytes]:
        with _translated():
            stream = self.client.images.get(ref).save(named=True, chunk_size=EXPORT_CHUNK_BYTES)
        return _chunks(stream)

    def image_layers(self, ref: str) -> tuple[ImageInfo, Iterator[bytes]]:
        with _translated():
            image = self.client.images.get(ref)
            stream = image.save(named=False, chunk_size=EXPORT_CHUNK_BYTES)
        return _image_info(image), _chunks(stream)

    def image_layer_folders(self, ref: str) -> tuple[ImageInfo, list[Path]] | None:
        """Docker's overlay2 store: each layer's folder found from its diff id through the
        daemon's own layer database, read as it is on this host (no export). None for
        Podman, another storage driver, a daemon on another host or a store this process
        cannot read."""
        if self.name != "docker":
            return None
        with _translated():
            image = self.client.images.get(ref)
            root = self.data_root()
        attrs = image.attrs or {}
        driver = attrs.get("GraphDriver") or {}
        info = _image_info(image)
        if driver.get("Name") != "overlay2" or not info.layers or root is None:
            return None
        folders = overlay2_folders(root, list(info.layers))
        upper = (driver.get("Data") or {}).get("UpperDir")
        if folders is None or not upper or Path(upper) != folders[-1]:
            return None  # not the store the daemon says this image is in
        return info, folders

    def remove_image(self, ref: str) -> None:
        with _translated():
            self.client.images.remove(ref)

    # -- containers -------------------------------------------------------------------------
    def _handle(self, container) -> Container:
        return Container(container.id, container.name, self, dict(container.labels or {}),
                         str((container.attrs or {}).get("Created", "")))

    def create(self, spec: ContainerSpec) -> Container:
        cdi = self.name == "podman"  # Podman takes GPUs as CDI devices, not device requests
        devices = None
        if cdi and (spec.gpu_ids or spec.gpus):
            ids = spec.gpu_ids or [str(i) for i in range(spec.gpus)]
            devices, device_requests = [f"nvidia.com/gpu={i}" for i in ids], None
        elif spec.gpu_ids:
            device_requests = [DeviceRequest(device_ids=spec.gpu_ids, capabilities=[["gpu"]])]
        elif spec.gpus:
            device_requests = [DeviceRequest(count=spec.gpus, capabilities=[["gpu"]])]
        else:
            device_requests = None
        if spec.network:
            network = {"network": spec.network, "hostname": spec.name}
        elif spec.network_of:  # the namespace, hostname and /etc/hosts of that container
            network = {"network_mode": f"container:{spec.network_of}"}
        else:
            network = {"network_mode": "none"}
        if spec.name:
            network["name"] = spec.name
        cpus = {"cpuset_cpus": str(spec.core)} if spec.core is not None else cpu_limits(spec.cpus)
        lock = spec.confinement
        confinement: dict = {}
        if lock.user:
            confinement["user"] = lock.user
        if lock.drop_capabilities:
            confinement.update(cap_drop=["ALL"], security_opt=["no-new-privileges"])
        if lock.read_only:
            confinement["read_only"] = True
        if lock.tmpfs:
            confinement["tmpfs"] = dict(lock.tmpfs)
        if lock.shm_size:
            confinement["shm_size"] = lock.shm_size
        if lock.pids_limit:
            confinement["pids_limit"] = lock.pids_limit
        if spec.memory is not None:  # no swap: a memory limit that swaps would skew timing
            confinement.update(mem_limit=spec.memory, memswap_limit=spec.memory)
        with _translated():
            container = self.client.containers.create(
                spec.image,
                command=spec.command,
                entrypoint=spec.entrypoint,
                **({"working_dir": spec.workdir} if spec.workdir else {}),
                environment=spec.env,
                **network,
                **confinement,
                **cpus,
                **({"cpu_shares": spec.cpu_shares} if spec.cpu_shares else {}),
                device_requests=device_requests,
                **({"devices": devices} if devices else {}),
                volumes={
                    str(m.host): {"bind": m.container, "mode": "ro" if m.read_only else "rw"}
                    for m in spec.mounts
                },
                labels={**spec.labels, **owned_labels(spec.label)},
                detach=True,
                **create_options(self.kind),  # what the engine in use needs on every container (kinds.ENGINES)
            )
        return self._handle(container)

    def start(self, container: Container) -> None:
        with _translated():
            self.client.api.start(container.id)

    def attach(self, container: Container) -> Iterator[bytes]:
        with _translated():  # attached before the container starts: nothing is missed
            stream = self.client.api.attach(container.id, stdout=True, stderr=True, stream=True, logs=True)
        return _chunks(stream)

    def wait(self, container: Container, timeout: float) -> int | None:
        try:
            with _translated():
                return self.client.api.wait(container.id, timeout=timeout).get("StatusCode")
        except EngineError as exc:
            if isinstance(exc.__cause__, requests.exceptions.RequestException):  # the read timed out
                raise TimedOut(f"the container did not end within {timeout:.0f} s") from exc
            raise

    def logs(self, container: Container) -> tuple[bytes, bytes]:
        with _translated():
            return (self.client.api.logs(container.id, stdout=True, stderr=False),
                    self.client.api.logs(container.id, stdout=False, stderr=True))

    def freeze(self, container: Container) -> None:
        with _translated():
            self.client.api.pause(container.id)

    def thaw(self, container: Container) -> None:
        with _translated():
            self.client.api.unpause(container.id)

    def state(self, container: Container) -> ContainerState:
        with _translated():
            state = self.client.api.inspect_container(container.id).get("State") or {}
        return ContainerState(str(state.get("Status", "")), int(state.get("Pid") or 0), state.get("ExitCode"))

    def set_cpu_weight(self, container: Container, weight: int) -> None:
        with _translated():
            self.client.api.update_container(container.id, cpu_shares=weight)

    def stop(self, container: Container) -> None:
        with _translated():
            self.client.api.kill(container.id)

    def remove(self, container: Container) -> None:
        with _translated():
            self.client.api.remove_container(container.id, force=True)

    # -- ownership and networks ----------------------------------------------------------
    def owned(self, run_id: str | None = None) -> list[Container]:
        labels = [MANAGED_LABEL] + ([f"{LABEL_RUN}={run_id}"] if run_id else [])
        with _translated():
            return [self._handle(c) for c in self.client.containers.list(all=True, filters={"label": labels})]

    def network(self, name: str) -> NetworkInfo:
        with _translated():
            network = self.client.networks.get(name)
        return NetworkInfo(network.name, bool(network.attrs.get("Internal")))


def overlay2_folders(root: Path, diff_ids: list[str]) -> list[Path] | None:
    """The overlay2 folders (``<root>/overlay2/<cache id>/diff``) of the layers ``diff_ids``
    (oldest first), from the layer database under ``<root>/image/overlay2/layerdb``: each
    layer's chain id (the digest of the chain below and its diff id) names its record, whose
    ``diff`` must be the diff id and whose ``cache-id`` names the folder. None where a record
    or a folder is missing or unreadable."""
    layerdb = root / "image" / "overlay2" / "layerdb" / "sha256"
    folders: list[Path] = []
    chain = ""
    try:
        for diff_id in diff_ids:
            chain = diff_id if not chain else "sha256:" + hashlib.sha256(f"{chain} {diff_id}".encode()).hexdigest()
            record = layerdb / chain.removeprefix("sha256:")
            if (record / "diff").read_text().strip() != diff_id:
                return None
            cache_id = (record / "cache-id").read_text().strip()
            folder = root / "overlay2" / cache_id / "diff"
            if not cache_id or "/" in cache_id or not folder.is_dir():
                return None
            folders.append(folder)
    except (OSError, UnicodeDecodeError):
        return None
    return folders
