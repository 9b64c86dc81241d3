"""``HostEngine``: no image at all. The entry's command runs with this host's own Python
environment, for machines with no container runtime (a GPU workstation, a cluster node with a
Python module, the project's lent GPU machine). Its results are signed and verify, and never
count: the entry's image, the thing a claim is about, was not used.

**The environment** is the Python that runs the runner (``sys.executable``'s environment; or
``RUNNER_HOST_PYTHON``): its ``bin`` folder comes first on the container's ``PATH``, so the
entry's ``python3`` is that interpreter, with the packages installed there. Nothing is ever
installed: "building" an entry compares the host's packages with the entry's lock and reports
every difference (``build_image``), and keeps a copy of the entry's files, owned by root, that
is mounted read-only at ``/entry`` (the entry cannot change its code once the run began). The
"image" is that record: the host environment's digest and the entry's files.

**The sandbox** (``bwrap``, Debian ``bubblewrap``, run as root; the runner's launcher has
joined the container's cgroups first, ``runner.engine.process``): new network (loopback
only), PID, IPC, UTS and cgroup namespaces; a root of its own where each folder of the host's
root is bound read-only (a folder on the way to a mount point is rebuilt from its children, so
``/opt/runner/harness`` can be mounted without writing to the host), the runner's home, the
results folder and the host's temporary and home folders hidden under empty tmpfs; the run's
mounts; its own ``/proc``, a minimal ``/dev`` with the device nodes of the spec's GPUs only,
its own ``/tmp``, ``/dev/shm`` and ``/scratch``; killed with its parent; then ``setpriv`` to
the unprivileged container user with every capability gone and no new privileges.

Without ``bwrap`` the engine refuses, unless ``RUNNER_HOST_UNSANDBOXED=1`` (``runner
reproduce --engine host --unsandboxed``): then the entry runs in a mount namespace only (its
mount points placed, the host's files writable as the container user may), with the host's
network and processes, in the runner's cgroups; the result says so.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Generator, Mapping
from pathlib import Path

from runner import paths
from runner.engine import cgroups, host_gpu
from runner.engine.gpus import gpu_containers_possible
from runner.engine.interface import (
    ContainerSpec,
    EngineError,
    EngineKind,
    EngineVersion,
    ImageInfo,
    NotFound,
    CONTAINER_USER,
    Unsupported,
)
from runner.engine.process import STAGE_ROOT, ProcessEngine, Staged, gpu_ids
from runner.errors import UserError

UNSANDBOXED_ENV = "RUNNER_HOST_UNSANDBOXED"
PYTHON_ENV = "RUNNER_HOST_PYTHON"
BWRAP_ENV = "RUNNER_BWRAP"
HIDE_ENV = "RUNNER_HOST_HIDE"  # more host folders to hide from the entry, ':'-separated
BASE_REPOSITORY = "runner/host"
# The host's folders the entry never sees (beside the runner's home and results folder):
# temporary folders (another process's files), home folders (keys, data a user keeps there).
HIDDEN = ("/tmp", "/var/tmp", "/run", "/dev/shm", "/home", "/root", "/mnt", "/media", "/srv")
# Not bound from the host: the sandbox makes its own.
OWN = frozenset({"proc", "dev", "tmp", "run", "lost+found"})
NVIDIA_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
PACKAGE_TIMEOUT_S = 120
# What the runner passes to ``build_image`` (runner.entry_build): how the host differs from the
# entry's lock, one line each, and how many packages the lock pins.
DIFFERENCES_ARG = "RUNNER_HOST_DIFFERENCES"
LOCKED_ARG = "RUNNER_LOCKED_PACKAGES"
_NAME = re.compile(r"[-_.]+")

# Run by the host's Python with an empty environment: what a container's python3 would import.
_PACKAGES = r"""
import importlib.metadata as md, json, sys
seen = {}
for d in md.distributions():
    name = d.metadata["Name"]
    if name and name.lower() not in seen:
        seen[name.lower()] = (name, d.version)
print(json.dumps({"python": sys.version.split()[0], "executable": sys.executable, "prefix": sys.prefix,
                  "base_prefix": sys.base_prefix, "packages": sorted(seen.values())}))
"""


def _fix() -> str:
    return ("install bubblewrap (`sudo runner setup --engine host`; Debian/Ubuntu: bubblewrap; with no package "
            "index, `dpkg -x bubblewrap_*.deb DIR` and put DIR/usr/bin on PATH), or pass --unsandboxed")


def unsandboxed() -> bool:
    return os.environ.get(UNSANDBOXED_ENV, "").strip() in ("1", "yes", "true")


def host_python() -> Path:
    """The interpreter whose environment the entries run with (not resolved: a virtual
    environment's ``python3`` is a link to the system's, and only its own path finds the venv)."""
    return Path(os.environ.get(PYTHON_ENV) or sys.executable)


def normalized(name: str) -> str:
    return _NAME.sub("-", name).lower()


class HostEngine(ProcessEngine):
    own_root = True
    # bwrap brings loopback up itself (no `ip`); unshare and chroot serve --unsandboxed, nsenter a second rank.
    launch_tools = ("setpriv", "nsenter", "unshare", "mount", "chroot")

    # -- reaching the engine --------------------------------------------------------------
    @classmethod
    def connect(cls, kind: EngineKind, timeout: float) -> HostEngine:
        return cls(kind)

    @classmethod
    def open(cls, kind: EngineKind) -> HostEngine:
        engine = cls(kind)
        if problem := engine.missing():
            raise UserError(problem, _fix())
        return engine

    @classmethod
    def setup(cls, kind: EngineKind, install: bool) -> HostEngine:
        if bwrap() is None and install and not unsandboxed():
            from runner.engine.daemon import apt_install  # lazy: start-up (only setup installs packages)
            apt_install(list(kind.packages), paths.home() / "logs" / "setup-host.log")
        return cls.open(kind)

    @classmethod
    def unreachable(cls, kind: EngineKind, error: BaseException) -> tuple[str, str]:
        return cls(kind).missing() or f"the host engine does not work here: {error}", _fix()

    def missing(self) -> str | None:
        """What the host engine lacks here, in words; None when it can run."""
        python = host_python()
        if not os.access(python, os.X_OK):
            return f"the host engine's Python {python} is not an executable ({PYTHON_ENV})"
        if bwrap() is None and not unsandboxed():
            return "the host engine sandboxes each entry with bubblewrap, and `bwrap` is not on this host's PATH"
        return None

    def ping(self) -> bool:
        return self.missing() is None

    def refusal(self) -> str | None:
        return self.missing() or self.container_refusal() or self._sandbox_problem()

    def refusal_fix(self) -> str:
        return _fix() + " (the result then says the entry ran unsandboxed)"

    def _sandbox_problem(self) -> str | None:
        """bwrap present but unable to make its namespaces here (a container without
        CAP_SYS_ADMIN): said before any run starts."""
        if unsandboxed():  # the run's folders still need a mount namespace of their own
            argv, what = ["unshare", "--mount", "--fork", "true"], "a mount namespace cannot be made here"
        else:
            argv = [str(bwrap()), "--unshare-net", "--unshare-pid", "--ro-bind", "/", "/", "--proc", "/proc",
                    "--dev", "/dev", "true"]
            what = "bubblewrap cannot make its namespaces here"
        try:
            answer = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False, env=_plain_env())
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{what}: {exc}"
        if answer.returncode != 0:
            said = (answer.stderr.strip().splitlines() or ["no message"])[-1][:200]
            return f"{what} ({said})"
        return None

    def gpu_support(self, facts: dict) -> tuple[bool, str]:
        return (gpu_containers_possible({"docker": {**facts, "engine": self.name}}),
                "install the NVIDIA driver on this host (libcuda.so.1 in `ldconfig -p`, or in a folder of LD_LIBRARY_PATH)")

    def version(self) -> EngineVersion:
        sandbox = _bwrap_version() if not unsandboxed() else "none"
        return EngineVersion(f"python {self.packages()['python']}, sandbox {sandbox}", "none (no daemon)")

    def facts(self) -> dict:
        listing = self.packages()
        return {
            "engine": self.name,
            "product": "the host's own environment (no image)",
            "version": listing["python"],
            "api_version": None,
            "os_type": "linux",
            "storage_driver": "none",
            "cgroup_version": str(cgroups.version()),
            "runtimes": [],
            "default_runtime": None,
            "nvidia_runtime": cuda_driver_found(),
            "sandbox": "none (--unsandboxed)" if unsandboxed() else f"bubblewrap {_bwrap_version()}",
            "python": listing["executable"],
            "isolated": False,
            "note": "no image: the entry ran with this host's Python environment; its results never count",
        }

    # -- the host's environment -----------------------------------------------------------
    def host_packages(self) -> list[tuple[str, str]]:
        return [(str(n), str(v)) for n, v in self.packages()["packages"]]

    def packages(self) -> dict:
        """The host environment as the entry's ``python3`` sees it: its version, executable,
        prefixes and installed distributions (name, version), read once per process."""
        cached = getattr(self, "_packages", None)
        if cached is not None:
            return cached
        python = host_python()
        try:
            answer = subprocess.run([str(python), "-I", "-c", _PACKAGES], capture_output=True, text=True,
                                    timeout=PACKAGE_TIMEOUT_S, check=False, env=_plain_env())
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise EngineError(f"the host's Python {python} did not list its packages: {exc}") from exc
        try:
            listing = json.loads(answer.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise EngineError(f"the host's Python {python} did not list its packages: "
                              f"{answer.stderr.strip()[-300:]}") from None
        listing["executable"] = str(python)
        self._packages = listing
        return listing

    def environment_digest(self) -> str:
        listing = self.packages()
        text = json.dumps({k: listing[k] for k in ("python", "executable", "packages")}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()

    def summary(self, lock_lines: list[str], locked: int) -> str:
        """The host's packages in a few words, for the result's reason it does not count."""
        listing = self.packages()
        installed = {normalized(n): (n, v) for n, v in listing["packages"]}
        from runner.frameworks import FRAMEWORKS  # lazy: start-up (only a run's record names them)
        keys = [normalized(d) for f in FRAMEWORKS.values() for d in f.distributions] + ["numpy", "onnxruntime"]
        named = [f"{n} {v}" for key in dict.fromkeys(keys) if (found := installed.get(key)) for n, v in [found]]
        differ = (f"{len(lock_lines)} of {locked} locked packages differ" if lock_lines
                  else "every locked package at its locked version")
        return f"Python {listing['python']} at {listing['executable']}, " + ", ".join(named + [differ])

    # -- images ---------------------------------------------------------------------------
    def host_base(self, name: str) -> ImageInfo:
        """The base "image" of every entry under this engine: the host's environment, by digest."""
        digest = self.environment_digest()
        tag = f"{BASE_REPOSITORY}:{digest[:20]}"
        try:
            return self.image(tag)
        except NotFound:
            listing = self.packages()
            return self._write_image_record({"tag": tag, "id": f"sha256:{digest}", "labels": {"org.runner.base.recipe": name},
                                "python": listing["executable"], "entry": None, "created": time.time()})

    def build_image(self, context: Path, dockerfile: str, tag: str, *, build_args: Mapping[str, str],
                    labels: Mapping[str, str], no_cache: bool = False) -> Generator[str, None, None]:
        return self._check(Path(context), tag, build_args, labels)

    def _check(self, context: Path, tag: str, build_args: Mapping[str, str],
               labels: Mapping[str, str]) -> Generator[str, None, None]:
        """No build: the differences from the lock the runner found (``DIFFERENCES_ARG``), said
        and kept, and a root-owned copy of the entry's files, which the containers mount."""
        listing = self.packages()
        differences = [line for line in build_args.get(DIFFERENCES_ARG, "").splitlines() if line]
        yield f"Step 1 : the host's packages ({listing['executable']}) against the lock (nothing is installed)\n"
        for line in differences:
            yield f"  differs: {line}\n"
        if not differences:
            yield "  every locked package is installed at its locked version\n"
        yield "Step 2 : keep a copy of the entry's files\n"
        entry_digest = _tree_digest(context / "entry")
        image_id = "sha256:" + hashlib.sha256(f"{self.environment_digest()}\0{entry_digest}".encode()).hexdigest()
        folder = self._images_dir() / image_id.removeprefix("sha256:")
        if not (folder / "entry").is_dir():
            staging = folder.with_name(folder.name + ".tmp")
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir(parents=True)
            shutil.copytree(context / "entry", staging / "entry", symlinks=True)
            _readable_by_all(staging)
            shutil.rmtree(folder, ignore_errors=True)
            staging.rename(folder)
        self._write_image_record({"tag": tag, "id": image_id, "labels": dict(labels), "python": listing["executable"],
                     "entry": str(folder / "entry"), "differences": differences,
                     "locked": int(build_args.get(LOCKED_ARG) or 0), "created": time.time()})
        yield f"Successfully checked {tag}\n"

    def isolation(self, ref: str) -> str | None:
        record = self._find(ref)
        sandbox = ("unsandboxed: no bubblewrap, the entry saw this host's network, processes and files; "
                   if unsandboxed() else "")
        differences = record.get("differences") or []
        return (f"engine host: {sandbox}the entry's image was not used (packages of this host: "
                f"{self.summary(differences, int(record.get('locked') or 0))})")

    def import_rootfs(self, tarball: Path, tag: str, *, env: Mapping[str, str], labels: Mapping[str, str],
                      cmd: list[str] | None = None) -> ImageInfo:
        raise Unsupported(self.name, "import a root file system (it has no images)",
                          "build base images with docker, podman or charliecloud")

    def image_files(self, ref: str) -> Generator[bytes, None, None]:
        """What the "image" adds to the host: the entry's files at ``entry/`` (the base, the
        host itself, adds nothing to inspect)."""
        record = self._find(ref)
        return _tar_of(Path(record["entry"]) if record.get("entry") else None)

    def remove_image(self, ref: str) -> None:
        record = self._find(ref)
        self._record_path(record["tag"]).unlink(missing_ok=True)
        if record.get("entry") and not any(r.get("id") == record.get("id") for r in self._image_records()):
            folder = Path(record["entry"]).parent
            if folder.parent == self._images_dir():  # only the copy this engine made, whatever the record says
                shutil.rmtree(folder, ignore_errors=True)

    # -- containers ------------------------------------------------------------------------
    def _stage(self, container_id: str, spec: ContainerSpec) -> Staged:
        folder = STAGE_ROOT / container_id
        folder.mkdir(parents=True, exist_ok=True, mode=0o755)
        binds = []
        record = self._find(spec.image)
        targets = {m.container for m in spec.mounts}
        if record.get("entry") and "/entry" not in targets:
            binds.append((str(record["entry"]), "/entry", True))
        for mount in spec.mounts:
            if not Path(mount.host).exists():
                raise EngineError(f"the mount source {mount.host} does not exist")
            binds.append((str(mount.host), mount.container, mount.read_only))
        return Staged(folder, tuple(binds), _container_user())

    def _launcher(self, spec: ContainerSpec, staged: Staged, groups: cgroups.Cgroups, network_of: str | None) -> str:
        join = "\n".join(f"echo $$ > {shlex.quote(str(path))}" for path in groups.procs_files())
        if unsandboxed():
            body = self._unsandboxed(spec, staged)
        else:
            argv = self._bwrap_argv(spec, staged)
            if network_of is not None:
                pid = sandboxed_pid(network_of)
                argv = ["nsenter", f"--net=/proc/{pid}/ns/net", *[a for a in argv if a != "--unshare-net"]]
            body = "exec " + " ".join(shlex.quote(a) for a in argv)
        return f"set -eu\n{join}\n{body}\n"

    def _environment(self, spec: ContainerSpec) -> dict[str, str]:
        python_bin = str(host_python().parent)
        env = {"PATH": f"{python_bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               "HOME": "/tmp", "PYTHONUNBUFFERED": "1", "USER": self.user_name}
        if os.environ.get("LD_LIBRARY_PATH"):  # where this host's driver and CUDA are found (part of its environment)
            env["LD_LIBRARY_PATH"] = os.environ["LD_LIBRARY_PATH"]
        env.update(spec.env)
        ids = gpu_ids(spec)
        if ids:
            env.setdefault("CUDA_VISIBLE_DEVICES", ",".join(ids))
        else:
            env.setdefault("CUDA_VISIBLE_DEVICES", "")  # no GPU the spec did not give (the nodes are absent too)
        return env

    def _bwrap_argv(self, spec: ContainerSpec, staged: Staged) -> list[str]:
        targets = [target for _host, target, _ro in staged.binds] + \
            [t for t, _ in spec.confinement.tmpfs if t != "/tmp"]
        argv = [str(bwrap()), "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                "--unshare-cgroup-try", "--die-with-parent", "--new-session"]
        steps = _tree("/", "/", targets)  # the host's root, walked once
        argv += root_binds(steps)
        argv += ["--proc", "/proc", "--dev", "/dev"]
        argv += _gpu_nodes(spec)
        argv += ["--size", str(cgroups.memory_bytes(spec.confinement.shm_size or "64m")), "--perms", "1777",
                 "--tmpfs", "/dev/shm"]
        argv += ["--perms", "1777", "--tmpfs", "/tmp"]
        exposed = _exposed(self.packages())
        hidden = [h for h in hidden_paths() if h.split("/")[1] not in OWN]  # the sandbox's own are empty already
        for path in hidden:
            argv += ["--tmpfs", path]
        for path in exposed:  # its folders on the way made traversable (bwrap makes them 0700)
            if under := [h for h in hidden if _under(path, h)]:
                parts = Path(path).relative_to(under[0]).parts
                for depth in range(1, len(parts)):
                    argv += ["--perms", "0755", "--dir", str(Path(under[0], *parts[:depth]))]
                argv += ["--ro-bind", path, path]
        for target, options in spec.confinement.tmpfs:
            if target != "/tmp":
                size = dict(p.split("=", 1) for p in options.split(",") if "=" in p).get("size")
                argv += (["--size", str(cgroups.memory_bytes(size))] if size else []) + \
                    ["--perms", "1777", "--tmpfs", target]
        made = {b for kind, _a, b in steps if kind != "link"}
        for target in targets:  # bwrap makes a mount point's missing parents 0700: the container user's way
            for parent in list(reversed(Path(target).parents))[1:]:
                if str(parent) not in made and not os.path.lexists(parent):
                    argv += ["--perms", "0755", "--dir", str(parent)]
                    made.add(str(parent))
        for host, target, read_only in staged.binds:
            argv += ["--ro-bind" if read_only else "--bind", host, target]
        argv += ["--remount-ro", "/", "--chdir", spec.workdir or "/", "--clearenv"]
        for key, value in self._environment(spec).items():
            argv += ["--setenv", key, value]
        uid, gid = staged.user
        argv += ["--", "setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--no-new-privs",
                 "--inh-caps=-all", "--bounding-set=-all", "--", *self._argv(spec)]
        return argv

    def _argv(self, spec: ContainerSpec) -> list[str]:
        command = list(spec.entrypoint or []) + list(spec.command)
        if not command:
            raise EngineError("the host engine has no image command to fall back on: the spec names none")
        return command

    def _unsandboxed(self, spec: ContainerSpec, staged: Staged) -> str:
        """A mount namespace only: a root of rbind mounts of the host's folders (writable as the
        container user may), the runner's home and the other hidden folders under empty tmpfs as
        in the sandbox, the run's mounts at their places, the host's /dev, /proc, /sys."""
        q = shlex.quote
        root = str(staged.folder / "root")
        targets = [target for _host, target, _ro in staged.binds] + [t for t, _ in spec.confinement.tmpfs]
        lines = ["set -eu", "mount --make-rprivate /", f"mkdir -p {q(root)}",
                 f"mount -t tmpfs -o mode=755 runner-root {q(root)}"]
        for kind, a, b in _tree("/", "/", targets, own=frozenset({"tmp", "lost+found"})):
            where = q(root + b)
            if kind == "dir":
                lines.append(f"mkdir -p {where}")
            elif kind == "link":
                lines.append(f"ln -s {q(a)} {where}")
            else:
                make = "mkdir -p" if Path(a).is_dir() else "touch"
                lines.append(f"{make} {where} && mount --rbind {q(a)} {where}")
        hidden = [h for h in hidden_paths() if h.split("/")[1] not in OWN]
        for path in hidden:  # the runner's home (the evaluation labels), other runs, home folders
            lines.append(f"mount -t tmpfs -o mode=755,size=1m runner-hidden {q(root + path)}")
        for path in _exposed(self.packages()):
            if any(_under(path, h) for h in hidden):
                lines.append(f"mkdir -p {q(root + path)} && mount --rbind {q(path)} {q(root + path)} && "
                             f"mount -o remount,bind,ro {q(root + path)}")
        for target, options in spec.confinement.tmpfs:
            size = dict(p.split("=", 1) for p in options.split(",") if "=" in p).get("size", "512m")
            lines.append(f"mkdir -p {q(root + target)} && mount -t tmpfs -o size={q(size)},mode=1777 runner-tmp "
                         f"{q(root + target)}")
        for host, target, read_only in staged.binds:
            make = "mkdir -p" if Path(host).is_dir() else f"mkdir -p {q(str(Path(root + target).parent))} && touch"
            lines.append(f"{make} {q(root + target)} && mount --bind {q(host)} {q(root + target)}")
            if read_only:
                lines.append(f"mount -o remount,bind,ro {q(root + target)}")
        uid, gid = staged.user
        env = " ".join(q(f"{k}={v}") for k, v in self._environment(spec).items())
        lines.append(f"exec chroot {q(root)} setpriv --reuid={uid} --regid={gid} --clear-groups --no-new-privs "
                     f"env -i -C {q(spec.workdir or '/')} {env} " + " ".join(q(a) for a in self._argv(spec)))
        inner = "\n".join(lines) + "\n"
        return f"exec unshare --mount --fork --kill-child /bin/sh -c {q(inner)}"


def sandboxed_pid(container_id: str, timeout: float = 30.0) -> int:
    """A process of the container whose network namespace is its own (not the host's): the
    launcher itself (bwrap, run as root) stays in the host's, only its children enter the new
    one. Waits for one to exist (the container was just started)."""
    host = os.readlink("/proc/self/ns/net")
    deadline = time.monotonic() + timeout
    while True:
        for pid in cgroups.Cgroups(container_id).pids():
            try:
                if os.readlink(f"/proc/{pid}/ns/net") != host:
                    return pid
            except OSError:
                continue
        if time.monotonic() > deadline:
            raise EngineError(f"container {container_id[:12]}, whose network this one joins, has no process in "
                              f"a network namespace of its own after {timeout:.0f} s")
        time.sleep(0.05)


def cuda_driver_found() -> bool:
    """The NVIDIA driver's ``libcuda`` is where the entry's CUDA looks: the loader's cache, or
    a folder of this host's ``LD_LIBRARY_PATH`` (which the containers get)."""
    if any(p.name.startswith("libcuda.so") for p in host_gpu.driver_libraries()):
        return True
    folders = [Path(p) for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
    return any(any(folder.glob("libcuda.so*")) for folder in folders if folder.is_dir())


def bwrap() -> Path | None:
    """bubblewrap: ``RUNNER_BWRAP`` (a ``dpkg -x``'d copy, say), else ``bwrap`` on the PATH."""
    named = os.environ.get(BWRAP_ENV)
    if named:
        return Path(named) if os.access(named, os.X_OK) else None
    found = shutil.which("bwrap")
    return Path(found) if found else None


def _bwrap_version() -> str:
    program = bwrap()
    if program is None:
        return "missing"
    try:
        answer = subprocess.run([str(program), "--version"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return (answer.stdout.strip().split() or ["", "unknown"])[-1]


def _container_user() -> tuple[int, int]:
    uid, gid = (int(x) for x in CONTAINER_USER.split(":"))
    return uid, gid


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _exposed(listing: dict) -> list[str]:
    """The folders the entry must see even under a hidden one: the host Python's prefixes."""
    return sorted({str(Path(listing[k])) for k in ("prefix", "base_prefix") if listing.get(k)})


def hidden_paths() -> list[str]:
    """The host folders hidden from the entry under empty tmpfs: the runner's home, the results
    folder, ``HIDDEN`` and ``RUNNER_HOST_HIDE``'s; each one that exists, as a real path (a
    prefix of the host's Python under one is bound back, read-only)."""
    wanted = [str(paths.home()), str(paths.results_dir()), str(paths.repo_root() / "results"), *HIDDEN,
              *(p for p in os.environ.get(HIDE_ENV, "").split(":") if p)]
    found = []
    for path in wanted:
        try:
            real = os.path.realpath(path)
        except OSError:
            continue
        if real in ("/", "") or not os.path.isdir(real):
            continue
        if real not in found:
            found.append(real)
    found.sort(key=lambda p: (p.count("/"), p))
    return [p for i, p in enumerate(found) if not any(_under(p, q) for q in found[:i])]  # outermost only


def _tree(host: str, sandbox: str, targets: list[str], own: frozenset[str] = OWN) -> list[tuple[str, str, str]]:
    """How to rebuild the host's folder ``host`` at ``sandbox``: ``("bind", host path, sandbox
    path)`` for a child no mount point lies under, ``("link", target, path)`` for a symbolic
    link, ``("dir", "", path)`` for a folder rebuilt from its children because a mount point lies
    under it. ``own``: the root's children the sandbox makes itself."""
    steps: list[tuple[str, str, str]] = []
    try:
        names = sorted(os.listdir(host))
    except OSError:
        return steps
    for name in names:
        if host == "/" and name in own:
            continue
        child = os.path.join(host, name)
        below = [t for t in targets if _under(t, os.path.join(sandbox, name))]
        if os.path.islink(child):
            steps.append(("link", os.readlink(child), os.path.join(sandbox, name)))
        elif any(t == os.path.join(sandbox, name) for t in below):
            continue  # the mount itself goes here
        elif below and os.path.isdir(child):
            steps.append(("dir", "", os.path.join(sandbox, name)))
            steps += _tree(child, os.path.join(sandbox, name), below, own)
        elif os.path.isdir(child) or os.path.isfile(child):
            steps.append(("bind", child, os.path.join(sandbox, name)))
    return steps


def root_binds(steps: list[tuple[str, str, str]]) -> list[str]:
    """bwrap's arguments for the host's root, read-only, rebuilt as ``_tree`` says (room for
    the mount points)."""
    argv: list[str] = []
    for kind, a, b in steps:
        if kind == "link":
            argv += ["--symlink", a, b]
        elif kind == "dir":
            argv += ["--dir", b]
        else:
            argv += ["--ro-bind", a, b]
    return argv


def _gpu_nodes(spec: ContainerSpec) -> list[str]:
    ids = gpu_ids(spec)
    if not ids:
        return []
    nodes = [f"/dev/nvidia{int(i)}" for i in ids if str(i).isdigit()] + [f"/dev/{n}" for n in NVIDIA_NODES]
    argv = []
    for node in nodes + ["/dev/nvidia-caps"]:
        if os.path.exists(node):
            argv += ["--dev-bind", node, node]
    return argv


def _tree_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder).as_posix()
        if path.is_symlink():
            digest.update(f"l\0{relative}\0{os.readlink(path)}\n".encode())
        elif path.is_file():
            mode = path.stat().st_mode & 0o111
            digest.update(f"f\0{relative}\0{mode:o}\0{hashlib.sha256(path.read_bytes()).hexdigest()}\n".encode())
    return digest.hexdigest()


def _readable_by_all(folder: Path) -> None:
    for root, _dirs, files in os.walk(folder):
        os.chmod(root, 0o755)
        for name in files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                os.chmod(path, 0o755 if os.stat(path).st_mode & 0o111 else 0o644)


def _tar_of(folder: Path | None) -> Generator[bytes, None, None]:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        if folder is not None:
            tar.add(str(folder), arcname="entry", recursive=True)
    data = buffer.getvalue()
    for start in range(0, len(data), 1 << 20):
        yield data[start:start + (1 << 20)]


def _plain_env() -> dict[str, str]:
    return {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}
