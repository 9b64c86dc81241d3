"""``ProcessEngine``: the container operations of an engine with no daemon (Charliecloud, and
the host engine), where a container is a process tree the runner starts and keeps itself.

What a daemon does for Docker, the runner does here, the same way for every such engine:

- **the record**: each container is a folder ``RUNNER_HOME/<engine>/containers/<id>/`` with
  ``record.json`` (name, owner labels, creation stamp, its first process and that process's
  start time) and the container's ``stdout``/``stderr``. ``owned`` lists the records, so
  ``remove_orphans`` finds a killed runner's containers as it finds Docker's;
- **the lock-down**: the runner (root) starts a launcher that joins the container's cgroups
  (``runner.engine.cgroups``: freezer, CPU accounting, cpuset, memory without swap, pids,
  devices) before anything else runs, then enters new network (loopback only, or the
  namespace of the container ``network_of`` names), PID, IPC, UTS and mount namespaces. In
  its private mount namespace it mounts the confinement's tmpfs folders and a ``/dev/shm`` of
  the container's own, binds each of the spec's mounts (read-only unless the spec says
  otherwise) into a staging folder, and then
  drops to the unprivileged container user (``setpriv``: no supplementary groups, no new
  privileges) to exec the engine's own command (``command``), given only the environment the
  spec names;
- **the operations**: ``attach`` reads the launcher's pipes, ``wait`` its exit, ``freeze``
  and ``thaw`` are the cgroup freezer (returning once the kernel says frozen), ``stop`` is
  SIGKILL to every process of the cgroup, ``remove`` also removes the cgroups, the staging
  folder and the record.

A subclass gives the image side and ``command(spec, stage)``: the argv that runs the spec's
command in the engine's container, given the staged mounts.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import secrets
import shlex
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from runner import paths
from runner.engine import cgroups
from runner.engine.containers import cpu_limits
from runner.engine.interface import (
    CONTAINER_USER,
    Conflict,
    Container,
    ContainerSpec,
    ContainerState,
    Engine,
    EngineError,
    ImageInfo,
    NotFound,
    TimedOut,
)
from runner.engine.labels import LABEL_RUN, owned_labels, process_start

RECORD = "record.json"
STAGE_ROOT = Path(os.environ.get("RUNNER_STAGE_ROOT", "/run/runner"))
READ_CHUNK = 1 << 16
SHM_DEFAULT = "64m"  # Docker's, for a spec that names no size
# The host programs the launcher uses (util-linux and iproute2; on every Debian host).
LAUNCH_TOOLS = ("unshare", "nsenter", "setpriv", "ip", "mount")


@dataclass(frozen=True)
class Staged:
    """Where, inside the launcher's private mount namespace, each of the spec's mounts and
    tmpfs folders was put: (host path to give the engine, path in the container, read-only)."""

    folder: Path  # the container's staging folder (traversable by the container user)
    binds: tuple[tuple[str, str, bool], ...]
    user: tuple[int, int]


class _Running:
    """The launcher process of a container this runner started, and its output pumps."""

    def __init__(self, process: subprocess.Popen, folder: Path, listen: queue.Queue | None):
        self.process = process
        self.listen = listen
        self.threads = [threading.Thread(target=self._pump, args=(stream, folder / name), daemon=True,
                                         name=f"runner-container-{name}")
                        for stream, name in ((process.stdout, "stdout"), (process.stderr, "stderr"))]
        self.open = len(self.threads)
        self.lock = threading.Lock()
        for thread in self.threads:
            thread.start()

    def _pump(self, stream, path: Path) -> None:
        with open(path, "ab") as out:
            while chunk := stream.read1(READ_CHUNK) if hasattr(stream, "read1") else stream.read(READ_CHUNK):
                out.write(chunk)
                out.flush()
                if self.listen is not None:
                    self.listen.put(chunk)
        with self.lock:
            self.open -= 1
            if self.open == 0 and self.listen is not None:
                self.listen.put(None)

    def drained(self, timeout: float) -> None:
        for thread in self.threads:
            thread.join(timeout)


class ProcessEngine(Engine):
    """A daemonless engine's containers: records, cgroups and namespaces the runner owns."""

    user_name = "entry"
    launch_tools = LAUNCH_TOOLS  # the host programs its launcher runs

    def __init__(self, kind):
        super().__init__(kind)
        self._running: dict[str, _Running] = {}
        self._listeners: dict[str, queue.Queue] = {}
        self._specs: dict[str, ContainerSpec] = {}

    # -- what a subclass gives ------------------------------------------------------------
    def command(self, spec: ContainerSpec, staged: Staged) -> list[str]:
        """The argv (run as the container user, in the container's namespaces) that runs
        ``spec.command`` in this engine's container, with ``staged``'s binds."""
        raise NotImplementedError

    def root_for(self, spec: ContainerSpec) -> Path | None:
        """The image's root folder on the host, for the mount points the staging makes (None:
        the engine needs none)."""
        return None

    # -- where -----------------------------------------------------------------------------
    def home(self) -> Path:
        return paths.home() / self.name

    # -- image records: a JSON file per tag under the engine's home (its id, labels, and
    # what the engine keeps beside them), written whole or not at all ---------------------
    def _images_dir(self) -> Path:
        return self.home() / "images"

    def _record_path(self, tag: str) -> Path:
        return self._images_dir() / (hashlib.sha256(tag.encode()).hexdigest() + ".json")

    def _image_records(self) -> list[dict]:
        records = []
        try:
            files = sorted(self._images_dir().glob("*.json"))
        except OSError:
            return []
        for path in files:
            try:
                record = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(record, dict) and isinstance(record.get("tag"), str):
                records.append(record)
        return records

    def _find(self, ref: str) -> dict:
        """The record a tag (``:latest`` when it names none) or an id (with or without
        ``sha256:``) names; ``NotFound`` otherwise."""
        wanted = ref if ":" in ref.rsplit("/", 1)[-1] or ref.startswith("sha256") else f"{ref}:latest"
        for record in self._image_records():
            if record["tag"] in (wanted, ref) or record.get("id") == ref \
                    or str(record.get("id", "")).removeprefix("sha256:") == ref:
                return record
        raise NotFound(f"no {self.name} image {ref}")

    def _write_image_record(self, record: dict) -> ImageInfo:
        self._images_dir().mkdir(parents=True, exist_ok=True)
        path = self._record_path(record["tag"])
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        tmp.replace(path)
        return self.image(record["tag"])

    def image(self, ref: str) -> ImageInfo:
        record = self._find(ref)
        tags = tuple(r["tag"] for r in self._image_records() if r.get("id") == record.get("id"))
        return ImageInfo(str(record["id"]), tags, dict(record.get("labels") or {}), (str(record["id"]),))

    def containers_dir(self) -> Path:
        return self.home() / "containers"

    def _folder(self, container_id: str) -> Path:
        folder = self.containers_dir() / container_id
        if not (folder / RECORD).is_file():
            raise NotFound(f"no {self.name} container {container_id[:12]}")
        return folder

    def _record(self, container_id: str) -> dict:
        try:
            record = json.loads((self._folder(container_id) / RECORD).read_text())
        except (OSError, ValueError) as exc:
            raise NotFound(f"the record of {self.name} container {container_id[:12]} is unreadable: {exc}") from exc
        if not isinstance(record, dict):
            raise NotFound(f"the record of {self.name} container {container_id[:12]} is not an object")
        return record

    def _write_record(self, container_id: str, record: dict) -> None:
        folder = self.containers_dir() / container_id
        tmp = folder / (RECORD + ".tmp")
        tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        tmp.replace(folder / RECORD)

    # -- the refusals ----------------------------------------------------------------------
    def container_refusal(self) -> str | None:
        """Why this host cannot run containers with the runner's guarantees: the cgroups
        (the freezer above all) or the launcher's programs."""
        if os.geteuid() != 0:
            return (f"the {self.name} engine runs its containers in cgroups and namespaces the runner "
                    "creates, which needs root here (run the runner as root)")
        problem = cgroups.problem()
        if problem:
            return f"the {self.name} engine cannot freeze containers here: {problem}"
        missing = [tool for tool in self.launch_tools if shutil.which(tool) is None]
        if missing:
            return f"the {self.name} engine needs {', '.join(missing)} (util-linux, iproute2) on this host"
        return None

    # -- containers ------------------------------------------------------------------------
    def create(self, spec: ContainerSpec) -> Container:
        container_id = secrets.token_hex(32)
        name = spec.name or f"runner-{spec.label}-{container_id[:12]}"
        for other in self._owned_records():
            if other.get("name") == name:
                raise Conflict(f"a {self.name} container named {name} exists")
        labels = {**spec.labels, **owned_labels(spec.label)}
        created = datetime.now(timezone.utc).isoformat()
        folder = self.containers_dir() / container_id
        folder.mkdir(parents=True, mode=0o700)
        network_of = None
        if spec.network:
            self.network(spec.network)  # an engine without cluster networks refuses here
        if spec.network_of:
            network_of = self._named(spec.network_of)
        record = {"id": container_id, "name": name, "labels": labels, "created": created, "image": spec.image,
                  "network_of": network_of, "status": "created", "pid": 0, "pid_start": None, "exit_code": None}
        self._write_record(container_id, record)
        (folder / "spec.json").write_text(json.dumps(_spec_json(spec), sort_keys=True))
        self._specs[container_id] = spec
        return Container(container_id, name, self, labels, created)

    def _named(self, name: str) -> str:
        for record in self._owned_records():
            if record.get("name") == name or record.get("id") == name:
                return str(record["id"])
        raise NotFound(f"no {self.name} container named {name}")

    def start(self, container: Container) -> None:
        record = self._record(container.id)
        if record.get("status") != "created":
            raise Conflict(f"container {container.name} was started already")
        spec = self._specs.get(container.id)
        if spec is None:
            raise Conflict(f"container {container.name} was created by another runner process")
        folder = self._folder(container.id)
        groups = cgroups.Cgroups(container.id)
        groups.create(self._limits(spec))
        try:
            staged = self._stage(container.id, spec)
            script = self._launcher(spec, staged, groups, record.get("network_of"))
            (folder / "launch.sh").write_text(script)
            listen = self._listeners.pop(container.id, None)
            process = subprocess.Popen(["/bin/sh", str(folder / "launch.sh")], stdin=subprocess.DEVNULL,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_launch_env(),
                                       start_new_session=True, close_fds=True)
        except BaseException:
            groups.remove(timeout=2)
            raise
        self._running[container.id] = _Running(process, folder, listen)
        record.update(status="running", pid=process.pid, pid_start=process_start(process.pid))
        self._write_record(container.id, record)

    def _limits(self, spec: ContainerSpec) -> cgroups.Limits:
        cpus: dict[str, Any] = {"cpuset_cpus": str(spec.core)} if spec.core is not None else cpu_limits(spec.cpus)
        return cgroups.Limits(
            cpuset=cpus.get("cpuset_cpus"),
            cpu_quota=cpus["nano_cpus"] / 1e9 if "nano_cpus" in cpus else None,
            memory=cgroups.memory_bytes(spec.memory) if spec.memory is not None else None,
            pids=spec.confinement.pids_limit,
            cpu_weight=spec.cpu_shares,
            devices=self.devices(spec) if cgroups.version() == 1 else None,
        )

    def devices(self, spec: ContainerSpec) -> tuple[str, ...]:
        """The devices the container may open: the ordinary ones, and the spec's GPUs."""
        from runner.engine import host_gpu  # lazy: start-up (only a container with GPUs reads the driver)
        return cgroups.ORDINARY_DEVICES + (host_gpu.device_rules(gpu_ids(spec)) if gpu_ids(spec) else ())

    def _stage(self, container_id: str, spec: ContainerSpec) -> Staged:
        folder = STAGE_ROOT / container_id
        folder.mkdir(parents=True, exist_ok=True, mode=0o755)
        os.chmod(STAGE_ROOT, 0o711)
        binds = []
        for index, mount in enumerate(spec.mounts):
            if not Path(mount.host).exists():
                raise EngineError(f"the mount source {mount.host} does not exist")
            binds.append((str(folder / f"m{index}"), mount.container, mount.read_only))
        for index, (target, _options) in enumerate(spec.confinement.tmpfs):
            if target != "/tmp":  # /tmp is the launcher's own private /tmp
                binds.append((str(folder / f"t{index}"), target, False))
        uid, gid = (int(x) for x in CONTAINER_USER.split(":"))
        return Staged(folder, tuple(binds), (uid, gid))

    def _launcher(self, spec: ContainerSpec, staged: Staged, groups: cgroups.Cgroups, network_of: str | None) -> str:
        """The launcher: joins the cgroups, enters the namespaces, stages the mounts as root,
        then execs the engine's command as the container user."""
        q = shlex.quote
        inside: list[str] = ["set -eu"]
        if network_of is None:
            inside.append("ip link set lo up")
        inside.append("mount --make-rprivate /")
        mounts = list(spec.mounts)
        tmpfs = [(t, o) for t, o in spec.confinement.tmpfs if t != "/tmp"]
        for (stage, _target, read_only), mount in zip(staged.binds, mounts):
            kind = "-d" if Path(mount.host).is_dir() else "-f"
            inside.append(f"[ {kind} {q(stage)} ] || {'mkdir -p' if kind == '-d' else 'touch'} {q(stage)}")
            inside.append(f"mount --bind {q(str(mount.host))} {q(stage)}")
            if read_only:
                inside.append(f"mount -o remount,bind,ro,nosuid,nodev {q(stage)}")
            else:
                inside.append(f"mount -o remount,bind,nosuid,nodev {q(stage)}")
        for (stage, _target, _ro), (_t, options) in zip(staged.binds[len(mounts):], tmpfs):
            inside.append(f"mkdir -p {q(stage)}")
            inside.append(f"mount -t tmpfs -o {q(_tmpfs_options(options))},nosuid,nodev runner-scratch {q(stage)}")
        inside.extend(self.stage_commands(spec, staged))
        inside.extend(_minimal_dev(staged.folder / "dev", spec))
        # The container's /tmp: replaced last, since a mount's source may lie under the host's.
        tmp_options = dict(spec.confinement.tmpfs).get("/tmp", "rw,size=512m,mode=1777")
        inside.append(f"mount -t tmpfs -o {q(_tmpfs_options(tmp_options))},nosuid,nodev runner-tmp /tmp")
        uid, gid = staged.user
        argv = self.command(spec, staged)
        inside.append(f"exec setpriv --reuid={uid} --regid={gid} --clear-groups --no-new-privs "
                      f"env -i USER={self.user_name} PATH=/usr/sbin:/usr/bin:/sbin:/bin "
                      + " ".join(q(a) for a in argv))
        inner = "\n".join(inside) + "\n"
        namespaces = "--pid --fork --kill-child --mount --ipc --uts --mount-proc"
        if network_of is None:
            enter = f"exec unshare --net {namespaces}"
        else:
            pid = int(self._record(network_of).get("pid") or 0)
            if not pid:
                raise Conflict(f"container {network_of[:12]} whose network this one joins is not running")
            enter = f"exec nsenter --net=/proc/{pid}/ns/net unshare {namespaces}"
        join = "\n".join(f"echo $$ > {q(str(path))}" for path in groups.procs_files())
        return f"set -eu\n{join}\n{enter} /bin/sh -c {q(inner)}\n"

    def stage_commands(self, spec: ContainerSpec, staged: Staged) -> list[str]:
        """Shell lines run as root in the private mount namespace before dropping to the
        container user (a subclass stages the image's root there)."""
        return []

    def attach(self, container: Container) -> Iterator[bytes]:
        if container.id in self._running:
            raise Conflict("attach before start: the output is read from the start")
        self._folder(container.id)
        listen: queue.Queue = queue.Queue()
        self._listeners[container.id] = listen
        return self._stream(container.id, listen)

    @staticmethod
    def _stream(container_id: str, listen: queue.Queue) -> Iterator[bytes]:
        while (chunk := listen.get()) is not None:
            yield chunk

    def wait(self, container: Container, timeout: float) -> int | None:
        running = self._running.get(container.id)
        if running is None:
            record = self._record(container.id)
            if record.get("status") == "exited":
                return record.get("exit_code")
            raise Conflict(f"container {container.name} is not running in this runner process")
        try:
            code = running.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TimedOut(f"the container did not end within {timeout:.0f} s") from None
        running.drained(timeout=10)
        code = 128 - code if code < 0 else code  # killed by a signal: Docker's 128 + signal
        try:
            record = self._record(container.id)
            record.update(status="exited", exit_code=code)
            self._write_record(container.id, record)
        except NotFound:
            pass
        return code

    def logs(self, container: Container) -> tuple[bytes, bytes]:
        folder = self._folder(container.id)
        running = self._running.get(container.id)
        if running is not None:
            running.drained(timeout=10)
        return tuple(_read(folder / name) for name in ("stdout", "stderr"))  # type: ignore[return-value]

    def freeze(self, container: Container) -> None:
        self._running_groups(container).freeze()

    def thaw(self, container: Container) -> None:
        self._running_groups(container).thaw()

    def _running_groups(self, container: Container) -> cgroups.Cgroups:
        state = self.state(container)
        if state.status not in ("running", "paused"):
            raise Conflict(f"container {container.name} is {state.status}, not running")
        return cgroups.Cgroups(container.id)

    def state(self, container: Container) -> ContainerState:
        record = self._record(container.id)
        running = self._running.get(container.id)
        if record.get("status") == "created":
            return ContainerState("created")
        if running is not None:
            code = running.process.poll()
            if code is None:
                paused = cgroups.Cgroups(container.id).frozen()
                return ContainerState("paused" if paused else "running", running.process.pid)
            return ContainerState("exited", 0, 128 - code if code < 0 else code)
        if record.get("status") == "exited":
            return ContainerState("exited", 0, record.get("exit_code"))
        if pid := _live_pid(record):
            return ContainerState("paused" if cgroups.Cgroups(container.id).frozen() else "running", pid)
        return ContainerState("dead" if cgroups.Cgroups(container.id).pids() else "exited", 0, None)

    def set_cpu_weight(self, container: Container, weight: int) -> None:
        self._running_groups(container).set_cpu_weight(weight)

    def stop(self, container: Container) -> None:
        self._folder(container.id)
        self._kill_launcher(container.id)
        groups = cgroups.Cgroups(container.id)
        if groups.exists():
            groups.kill()

    def _kill_launcher(self, container_id: str) -> None:
        """SIGKILL to the container's launcher and its process group. The launcher joins the
        container's cgroups itself, a moment after ``start`` returns: one stopped or removed
        before it joined would be in none of them, out of reach of the cgroup's kill, and would
        go on to join (a group being removed: its removal then fails) or to run the command
        outside them. Its pid is this process's child's, or the record's while its start time
        still matches (another runner's container)."""
        running = self._running.get(container_id)
        pid = running.process.pid if running is not None and running.process.poll() is None else 0
        if not pid and running is None:
            try:
                pid = _live_pid(self._record(container_id))
            except NotFound:
                return
        if pid:
            try:
                os.killpg(pid, signal.SIGKILL)  # the launcher leads its own session and group
            except (ProcessLookupError, PermissionError):
                pass

    def remove(self, container: Container) -> None:
        folder = self._folder(container.id)
        self._kill_launcher(container.id)
        # Ranks that joined this container's network namespace go first (as Docker requires).
        groups = cgroups.Cgroups(container.id)
        groups.remove()
        running = self._running.pop(container.id, None)
        if running is not None:
            try:
                running.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            running.drained(timeout=5)
            for stream in (running.process.stdout, running.process.stderr):
                if stream is not None:
                    stream.close()
        self._listeners.pop(container.id, None)
        self._specs.pop(container.id, None)
        shutil.rmtree(STAGE_ROOT / container.id, ignore_errors=True)
        shutil.rmtree(folder, ignore_errors=True)

    # -- ownership ---------------------------------------------------------------------------
    def _owned_records(self) -> list[dict]:
        records = []
        try:
            folders = sorted(self.containers_dir().iterdir())
        except OSError:
            return []
        for folder in folders:
            try:
                record = json.loads((folder / RECORD).read_text())
            except (OSError, ValueError):
                continue
            if isinstance(record, dict) and record.get("id") == folder.name:
                records.append(record)
        return records

    def owned(self, run_id: str | None = None) -> list[Container]:
        found = []
        for record in self._owned_records():
            labels = record.get("labels")
            if not isinstance(labels, dict):
                labels = {}
            if run_id is not None and labels.get(LABEL_RUN) != run_id:
                continue
            found.append(Container(str(record["id"]), str(record.get("name", "")), self,
                                   {str(k): str(v) for k, v in labels.items()}, str(record.get("created", ""))))
        return found


def _minimal_dev(folder: Path, spec: ContainerSpec) -> list[str]:
    """Shell lines that replace ``/dev`` in the launcher's mount namespace (which the engine binds
    into the container) with a minimal one, as Docker's: the ordinary character devices, a pty
    instance of its own, its own ``/dev/shm`` of the spec's size (the host's is shared by every
    process of the host: a channel between containers and a store across runs), the standard
    links, and the device nodes of the spec's GPUs only. No other host device is even named; on
    cgroup v1 the devices cgroup refuses them besides (on v2 this is the only barrier)."""
    q = shlex.quote
    dev = str(folder)
    nodes = ["null", "zero", "full", "random", "urandom", "tty"]
    ids = gpu_ids(spec)
    if ids:
        nodes += [f"nvidia{int(i)}" for i in ids if str(i).isdigit()]
        nodes += ["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"]
    lines = [f"mkdir -p {q(dev)}", f"mount -t tmpfs -o size=1m,mode=755,nosuid runner-dev {q(dev)}"]
    for node in nodes:
        lines.append(f"if [ -c /dev/{node} ]; then touch {q(dev + '/' + node)} && "
                     f"mount --bind /dev/{node} {q(dev + '/' + node)}; fi")
    if ids:
        lines.append(f"if [ -d /dev/nvidia-caps ]; then mkdir {q(dev + '/nvidia-caps')} && "
                     f"mount --bind /dev/nvidia-caps {q(dev + '/nvidia-caps')}; fi")
    shm = f"size={spec.confinement.shm_size or SHM_DEFAULT},mode=1777"
    lines += [f"mkdir {q(dev + '/pts')} {q(dev + '/shm')} {q(dev + '/mqueue')}",
              f"mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 runner-pts {q(dev + '/pts')}",
              f"ln -s pts/ptmx {q(dev + '/ptmx')}",
              f"mount -t tmpfs -o {q(shm)},nosuid,nodev runner-shm {q(dev + '/shm')}",
              f"ln -s /proc/self/fd {q(dev + '/fd')}",
              *(f"ln -s /proc/self/fd/{n} {q(dev + '/' + name)}" for n, name in enumerate(("stdin", "stdout", "stderr"))),
              f"mount --move {q(dev)} /dev"]
    return lines


def gpu_ids(spec: ContainerSpec) -> list[str]:
    """The GPU ids a spec names (its ids, else the first ``gpus``)."""
    return list(spec.gpu_ids or [str(i) for i in range(spec.gpus)])


def _spec_json(spec: ContainerSpec) -> dict:
    return {"image": spec.image, "command": list(spec.command), "label": spec.label,
            "mounts": [[str(m.host), m.container, m.read_only] for m in spec.mounts],
            "env": sorted(spec.env), "gpus": gpu_ids(spec), "network_of": spec.network_of}


def _tmpfs_options(options: str) -> str:
    """Docker's tmpfs options (``rw,size=2g,mode=1777``) as mount(8)'s."""
    return ",".join(part for part in options.split(",") if part and part not in ("rw", "exec"))


def _launch_env() -> dict[str, str]:
    return {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def mount_points(root: Path, spec: ContainerSpec, extra: tuple[str, ...] = ()) -> list[str]:
    """The folders (in the container) the staging must create in the image's root for the
    spec's binds; refuses a path through a symbolic link of the image (it would lead out of it)."""
    wanted = [m.container for m in spec.mounts] + [t for t, _ in spec.confinement.tmpfs if t != "/tmp"] + list(extra)
    missing = []
    for target in wanted:
        parts = [p for p in Path(target).parts if p not in ("/", "")]
        if not parts or any(p in (".", "..") for p in parts):
            raise EngineError(f"mount target {target!r} is not an absolute path in the container")
        here = root
        for part in parts:
            here = here / part
            if here.is_symlink():
                raise EngineError(f"the image's {target} passes through a symbolic link: the runner will not "
                                  "mount over it")
        if not here.exists():
            missing.append(target)
    return missing


def _live_pid(record: dict) -> int:
    """The launcher's pid in a container's record while that process still runs (its start
    time still the recorded one: a pid the kernel gave to another process is not it); else 0."""
    pid = int(record.get("pid") or 0)
    started = record.get("pid_start")
    return pid if pid and started and process_start(pid) == started else 0
