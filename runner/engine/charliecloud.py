"""``CharliecloudEngine``: Charliecloud (``ch-image``, ``ch-run``), the engine of HPC sites with
no container daemon. Its containers are the runner's own process trees
(``runner.engine.process``); this module gives the images and the ``ch-run`` command.

**Images** live in a ``ch-image`` storage folder of the runner's home
(``RUNNER_HOME/charliecloud/storage``), one plain folder per image, with a record per tag
(``images/``): its id, labels and environment. Every ``ch-image`` command runs as an
unprivileged builder account (``BUILDER``, never root: a ``RUN`` step is the entry's code),
in a network namespace with only loopback, a PID namespace (its own ``/proc``) and a private
mount namespace where the storage and the build context are the only folders of the runner's
home it sees (bound into a staging folder it can reach) and ``/tmp`` and ``/dev/shm`` are
private tmpfs. ``ch-image`` is a
program of the system's Python 3 (it needs ``lark``), so it is run by ``/usr/bin/python3``,
never by the runner's virtual environment.

Two of ``ch-image``'s ways differ from Docker's, and the runner restores Docker's:

- ``FROM ${BASE_IMAGE}``: ``ch-image`` 0.31 does not substitute build arguments in ``FROM``.
  The runner gives it a copy of the Dockerfile whose ``FROM`` lines have the runner's own
  build arguments substituted (nothing else changes; the Dockerfile policy ran first);
- ``RUN`` steps see the host's ``/tmp`` instead of the image's (``ch-run`` binds it). The
  ``ch-run`` that ``ch-image`` calls for a step is a wrapper that copies the image's ``/tmp``
  into the private ``/tmp`` before the step and back after it, so a file a ``COPY`` put in
  ``/tmp`` is there for the next ``RUN``, as under Docker.

An image's id is the digest of its content (``sha256`` over every file's path, type, mode,
size and content, and its environment): two builds of the same files have the same id on any
host, and drift compares base images by content for every engine.

**Containers**: ``ch-run`` on the image's folder, overlaid in the launcher's private mount
namespace with a tmpfs that holds only the mount points the spec needs, then made read-only;
the spec's mounts bound from the staging folder; the image's environment, then the spec's,
and nothing of the runner's; the GPUs' device nodes allowed by the devices cgroup and the
host driver's libraries bound at ``/usr/local/nvidia/lib64``.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import time
from collections.abc import Generator, Mapping
from pathlib import Path

from runner import paths
from runner.digests import sha256_file
from runner.engine import cgroups, host_gpu
from runner.engine.gpus import gpu_containers_possible
from runner.engine.interface import (
    BuildFailed,
    ContainerSpec,
    EngineError,
    EngineKind,
    EngineVersion,
    ImageInfo,
    NotFound,
)
from runner.engine.process import STAGE_ROOT, ProcessEngine, Staged, gpu_ids, mount_points
from runner.errors import UserError

SYSTEM_PYTHON = "/usr/bin/python3"
CH_IMAGE = "/usr/bin/ch-image"
CH_RUN = "/usr/bin/ch-run"
# The account every ch-image command runs as: not root, not the container user (so the entry
# does not own its image's files), and reachable nowhere else (its storage is in root's home).
BUILDER = (int(os.environ.get("RUNNER_CH_BUILDER_UID", "2000")),) * 2
BUILD_TMP_SIZE = os.environ.get("RUNNER_CH_BUILD_TMP", "8g")
EXPORT_CHUNK_BYTES = 1 << 20
# What ch-image adds at the top of an image's folder: its metadata, and its build cache's
# link (a git work tree). Neither is the image's content.
ENGINE_FILES = frozenset({"ch", ".git", ".gitignore"})
STORAGE_MOUNT = STAGE_ROOT / "charliecloud-storage"
_FROM = re.compile(r"^(\s*FROM\s+(?:--platform=\S+\s+)?)(\S+)(.*)$", re.IGNORECASE)

# ch-image with another ch-run (the /tmp wrapper): ch-image finds ch-run beside itself, so the
# bootstrap loads ch-image as a module and points it at the wrapper's folder before main().
_BOOTSTRAP = """\
import runpy, sys
program = runpy.run_path(%(ch_image)r, run_name="ch_image")
import charliecloud as ch
ch.CH_BIN = sys.argv[1]
ch.CH_RUN = ch.CH_BIN + "/ch-run"
sys.argv = ["ch-image"] + sys.argv[2:]
try:
    program["main"]()
except ch.Fatal_Error as error:
    ch.ERROR(*error.args, **error.kwargs)
    ch.exit(1)
"""
# A RUN step's ch-run: the image's /tmp in the private /tmp for the step, and back after it.
_RUN_WRAPPER = """\
#!/bin/sh
image=; previous=
for argument in "$@"; do
  if [ "$argument" = "--" ]; then image=$previous; break; fi
  previous=$argument
done
find /tmp -mindepth 1 -maxdepth 1 -exec rm -rf {} +
if [ -d "$image/tmp" ]; then find "$image/tmp" -mindepth 1 -maxdepth 1 -exec cp -a {} /tmp/ \\; ; fi
%(ch_run)s "$@"
code=$?
if [ -d "$image/tmp" ]; then
  find "$image/tmp" -mindepth 1 -maxdepth 1 -exec rm -rf {} +
  find /tmp -mindepth 1 -maxdepth 1 -exec cp -a {} "$image/tmp/" \\;
fi
exit $code
"""


def _fix() -> str:
    return "install it with `sudo runner setup --engine charliecloud` (Debian: charliecloud-runtime, charliecloud-builders)"


class CharliecloudEngine(ProcessEngine):
    images_in_runner_home = True  # the storage folder and the tag records (``storage``, ``_images_dir``)

    # -- reaching the engine --------------------------------------------------------------
    @classmethod
    def connect(cls, kind: EngineKind, timeout: float) -> CharliecloudEngine:
        return cls(kind)

    @classmethod
    def open(cls, kind: EngineKind) -> CharliecloudEngine:
        engine = cls(kind)
        problem = engine.missing()
        if problem:
            raise UserError(problem, _fix())
        return engine

    @classmethod
    def setup(cls, kind: EngineKind, install: bool) -> CharliecloudEngine:
        engine = cls(kind)
        if engine.missing() and install:
            from runner.engine.daemon import apt_install  # lazy: start-up (only setup installs packages)
            apt_install(list(kind.packages), paths.home() / "logs" / "setup-charliecloud.log")
        return cls.open(kind)

    def missing(self) -> str | None:
        """What of Charliecloud this host lacks, in words; None when it has everything."""
        for program in (CH_RUN, CH_IMAGE):
            if not os.access(program, os.X_OK):
                return f"Charliecloud is not installed ({program} is missing)"
        try:
            answer = subprocess.run([SYSTEM_PYTHON, "-c", "import lark"], capture_output=True, timeout=30,
                                    check=False, env=_plain_env())
        except (OSError, subprocess.TimeoutExpired):
            return f"ch-image needs the system's Python 3 ({SYSTEM_PYTHON}), which does not run"
        if answer.returncode != 0:
            return f"ch-image needs lark in the system's Python 3 ({SYSTEM_PYTHON}: python3-lark)"
        return None

    def ping(self) -> bool:
        return self.missing() is None

    def gpu_support(self, facts: dict) -> tuple[bool, str]:
        return (gpu_containers_possible({"docker": {**facts, "engine": self.name}}),
                "install the NVIDIA driver's user-space libraries on this host (libcuda.so.1 in `ldconfig -p`)")

    def version(self) -> EngineVersion:
        try:
            answer = subprocess.run([CH_RUN, "--version"], capture_output=True, text=True, timeout=30,
                                    check=False, env=_plain_env())
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise EngineError(f"ch-run --version failed: {exc}") from exc
        text = (answer.stdout or answer.stderr).strip().splitlines()
        return EngineVersion(text[0] if text else "?", "none (no daemon)")

    def facts(self) -> dict:
        return {
            "engine": self.name,
            "product": "Charliecloud",
            "version": self.version().version,
            "api_version": None,
            "os_type": "linux",
            "storage_driver": "directory",
            "cgroup_version": str(cgroups.version()),
            "runtimes": [],
            "default_runtime": None,
            # Not a runtime: the runner binds the host driver's libraries itself (host_gpu).
            "nvidia_runtime": any(p.name.startswith("libcuda.so") for p in host_gpu.driver_libraries()),
            "note": "no daemon: containers are ch-run process trees in cgroups the runner owns",
        }

    def refusal(self) -> str | None:
        return self.missing() or self.container_refusal()

    def data_root(self) -> Path | None:
        return self.storage()

    # -- images -----------------------------------------------------------------------------
    def storage(self) -> Path:
        """ch-image's storage folder (it makes it itself, in a folder the builder owns)."""
        return self.home() / "builder" / "storage"

    def image_dir(self, ref: str) -> Path:
        record = self._find(ref)
        folder = self.storage() / "img" / storage_name(record["tag"])
        if not folder.is_dir():
            raise NotFound(f"the charliecloud image {record['tag']} has no folder in {self.storage()}")
        return folder

    def build_image(self, context: Path, dockerfile: str, tag: str, *, build_args: Mapping[str, str],
                    labels: Mapping[str, str], no_cache: bool = False) -> Generator[str, None, None]:
        text = (Path(context) / dockerfile).read_text()
        translated = "".join(self._translate(line, build_args) for line in text.splitlines())
        os.chmod(context, 0o755)  # the builder reads the context (the runner's own copy)
        args = ["build", "-t", tag, "-f", "{stage}/Dockerfile"]
        for key, value in build_args.items():
            args += ["--build-arg", f"{key}={value}"]
        if no_cache:  # every instruction run again, as Docker's nocache (--no-cache would bypass the cache)
            args.insert(0, "--rebuild")
        args.append("{stage}/context")
        return self._build_stream(args, Path(context), translated, tag, labels)

    def _translate(self, line: str, build_args: Mapping[str, str]) -> str:
        """One Dockerfile line for ch-image: ``FROM`` with the build arguments substituted, and
        the environment of a base image the runner imported after it (Docker keeps an imported
        image's ``ENV`` in its config; ch-image's build cache keeps only its files)."""
        line = _substitute_from(line, build_args)
        match = _FROM.match(line)
        if not match:
            return line + "\n"
        try:
            env = self._find(match.group(2)).get("env") or {}
        except NotFound:
            env = {}
        return line + "\n" + "".join(f"ENV {key}={json.dumps(str(value))}\n" for key, value in sorted(env.items()))

    def _build_stream(self, args: list[str], context: Path | None, dockerfile: str | None, tag: str,
                      labels: Mapping[str, str], env: Mapping[str, str] | None = None,
                      cmd: list[str] | None = None, tarball: Path | None = None) -> Generator[str, None, None]:
        tail: list[str] = []
        with self._builder(context, dockerfile, tarball) as (stage, argv):
            command = argv + [a.format(stage=stage) for a in args]
            process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, env=_plain_env(), start_new_session=True)
            try:
                assert process.stdout is not None
                for raw in process.stdout:
                    line = raw.decode("utf-8", "replace")
                    tail = (tail + [line.rstrip()])[-20:]
                    yield _step_line(line)
                code = process.wait()
            finally:
                if process.poll() is None:
                    process.kill()
                    process.wait()
            if code == 0:  # a multi-stage build's earlier stages are images too: a gigabyte each
                self._delete(argv, self._stages(tag))
        if code != 0:
            errors = [line for line in tail if line.startswith(("error:", "ERROR"))] or tail[-3:]
            raise BuildFailed(" | ".join(errors)[-800:] or f"ch-image exited with code {code}")
        self._record_image(tag, labels, env, cmd)

    def _builder(self, context: Path | None, dockerfile: str | None, tarball: Path | None):
        return _BuilderStage(self, context, dockerfile, tarball)

    def _stages(self, tag: str) -> list[str]:
        """The tags ch-image gave the earlier stages of ``tag``'s build (``TAG_stage0`` ...)."""
        prefix = storage_name(tag) + "_stage"
        try:
            names = [p.name for p in (self.storage() / "img").iterdir() if p.name.startswith(prefix)]
        except OSError:
            return []
        return [f"{tag if ':' in tag.rsplit('/', 1)[-1] else tag + ':latest'}_stage{name[len(prefix):]}"
                for name in sorted(names)]

    @staticmethod
    def _delete(argv: list[str], tags: list[str]) -> None:
        """``ch-image delete`` each tag, as the builder (inside ``_builder``: under its lock)."""
        for tag in tags:
            subprocess.run(argv + ["delete", tag], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           stdin=subprocess.DEVNULL, env=_plain_env(), check=False, timeout=600)

    def _record_image(self, tag: str, labels: Mapping[str, str], env: Mapping[str, str] | None,
                      cmd: list[str] | None) -> ImageInfo:
        folder = self.storage() / "img" / storage_name(tag)
        if not folder.is_dir():
            raise EngineError(f"ch-image reported success but made no folder for {tag}")
        metadata = _metadata(folder)
        if env:  # an imported root file system: its environment is the recipe's
            metadata["env"] = dict(env)
            _write_metadata(folder, metadata)
        digest = content_digest(folder, metadata.get("env") or {})
        record = {"tag": tag, "id": f"sha256:{digest}", "labels": dict(labels), "env": metadata.get("env") or {},
                  "cwd": metadata.get("cwd") or "/", "cmd": list(cmd) if cmd else None, "created": time.time()}
        return self._write_image_record(record)

    def import_rootfs(self, tarball: Path, tag: str, *, env: Mapping[str, str], labels: Mapping[str, str],
                      cmd: list[str] | None = None) -> ImageInfo:
        for _ in self._build_stream(["import", "{stage}/rootfs.tar", tag], None, None, tag, labels,
                                    env=env, cmd=cmd, tarball=Path(tarball)):
            pass
        return self.image(tag)

    def image_files(self, ref: str) -> Generator[bytes, None, None]:
        folder = self.image_dir(ref)
        names = sorted(p.name for p in folder.iterdir() if p.name not in ENGINE_FILES)
        process = subprocess.Popen(["tar", "--numeric-owner", "--no-recursion" if not names else "--recursion",
                                    "-C", str(folder), "-cf", "-", "--", *names],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        return _tar_stream(process)

    def remove_image(self, ref: str) -> None:
        """The image's folder, and those of its build's earlier stages (``ch-image`` keeps each
        ``FROM`` stage as an image ``<name>_stage<N>``: a dependency stage's folder holds the
        wheels and the venv, often more than the image itself), then its record."""
        record = self._find(ref)
        self._record_path(record["tag"]).unlink(missing_ok=True)
        with self._builder(None, None, None) as (_stage, argv):
            self._delete(argv, [record["tag"], *self._stages(record["tag"])])
        shutil.rmtree(self.storage() / "img" / storage_name(record["tag"]), ignore_errors=True)

    # -- containers ------------------------------------------------------------------------
    def stage_commands(self, spec: ContainerSpec, staged: Staged) -> list[str]:
        q = shlex.quote
        image = self.image_dir(spec.image)
        stage = staged.folder
        libraries = (host_gpu.CONTAINER_LIBRARY_DIR,) if gpu_ids(spec) else ()
        extra = libraries + ((spec.workdir,) if spec.workdir else ())  # Docker makes a missing workdir too
        lines = [f"mkdir -p {q(str(stage / 'overlay'))} {q(str(stage / 'root'))}",
                 f"mount -t tmpfs -o size=16m,mode=755 runner-overlay {q(str(stage / 'overlay'))}",
                 f"mkdir {q(str(stage / 'overlay/upper'))} {q(str(stage / 'overlay/work'))}",
                 f"mount -t overlay runner-root -o {q(f'lowerdir={image},upperdir={stage}/overlay/upper,workdir={stage}/overlay/work')} {q(str(stage / 'root'))}"]
        files = {m.container for m in spec.mounts if not Path(m.host).is_dir()}
        for target in mount_points(image, spec, extra):
            where = q(str(stage / "root") + target)
            lines.append(f"mkdir -p {q(str(stage / 'root') + str(Path(target).parent))} && touch {where}"
                         if target in files else f"mkdir -p {where}")
        lines.append(f"mount -o remount,ro {q(str(stage / 'root'))}")
        if libraries:
            folder = stage / "nvidia"
            lines.append(f"mkdir -p {q(str(folder))}")
            for library in host_gpu.driver_libraries():
                lines.append(f"touch {q(str(folder / library.name))} && "
                             f"mount --bind -o ro {q(str(library))} {q(str(folder / library.name))}")
        env_file = stage / "environment"
        lines.append(f"cat > {q(str(env_file))} <<'RUNNER_ENV_END'\n{self._environment(spec)}RUNNER_ENV_END")
        lines.append(f"chmod 644 {q(str(env_file))}")
        return lines

    def _environment(self, spec: ContainerSpec) -> str:
        env = dict(spec.env)
        ids = gpu_ids(spec)
        if ids:
            env.setdefault("CUDA_VISIBLE_DEVICES", ",".join(ids))
            env["NVIDIA_VISIBLE_DEVICES"] = ",".join(ids)
        lines = []
        for key, value in env.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) or "\n" in value or "RUNNER_ENV_END" in value:
                raise EngineError(f"environment variable {key!r} cannot be passed to a charliecloud container")
            lines.append(f"{key}={value}\n")
        return "".join(lines)

    def command(self, spec: ContainerSpec, staged: Staged) -> list[str]:
        record = self._find(spec.image)
        stage = staged.folder
        argv = [CH_RUN, "--no-passwd", "--env-no-expand", "--unset-env=*", "--set-env",
                f"--set-env={stage}/environment"]
        if gpu_ids(spec):
            argv.append(f"--set-env=LD_LIBRARY_PATH={host_gpu.CONTAINER_LIBRARY_DIR}")
            argv += ["-b", f"{stage}/nvidia:{host_gpu.CONTAINER_LIBRARY_DIR}"]
        argv += ["--cd", spec.workdir or str(record.get("cwd") or "/")]
        for host, target, _read_only in staged.binds:
            argv += ["-b", f"{host}:{target}"]
        command = list(spec.entrypoint or []) + list(spec.command)
        if not command and record.get("cmd"):
            command = list(record["cmd"])
        return argv + [str(stage / "root"), "--", *command]


class _BuilderStage:
    """A context manager: the staging folder of one ``ch-image`` command and the argv that runs
    it as the builder, in its namespaces. The staging folder (under ``/run/runner``) holds the
    bootstrap, the ``ch-run`` wrapper, the Dockerfile and the mount points of the storage and
    the context; it is removed afterwards."""

    def __init__(self, engine: CharliecloudEngine, context: Path | None, dockerfile: str | None,
                 tarball: Path | None):
        self.engine, self.context, self.dockerfile, self.tarball = engine, context, dockerfile, tarball

    def __enter__(self) -> tuple[str, list[str]]:
        engine = self.engine
        # One ch-image at a time on the storage: the lock lives beside the storage it guards, so
        # every runner home that shares the storage shares the lock (not the home's locks/).
        engine.home().mkdir(parents=True, exist_ok=True)
        self.lock = open(engine.home() / "storage.lock", "w")
        fcntl.flock(self.lock, fcntl.LOCK_EX)
        uid, gid = BUILDER
        holder = engine.storage().parent
        holder.mkdir(parents=True, exist_ok=True)
        os.chown(holder, uid, gid)
        STAGE_ROOT.mkdir(parents=True, exist_ok=True)
        os.chmod(STAGE_ROOT, 0o711)
        self.stage = Path(_mkdtemp(STAGE_ROOT, "build-"))
        os.chmod(self.stage, 0o755)
        (self.stage / "bin").mkdir()
        (self.stage / "bootstrap.py").write_text(_BOOTSTRAP % {"ch_image": CH_IMAGE})
        wrapper = self.stage / "bin" / "ch-run"
        wrapper.write_text(_RUN_WRAPPER % {"ch_run": CH_RUN})
        wrapper.chmod(0o755)
        if self.dockerfile is not None:
            (self.stage / "Dockerfile").write_text(self.dockerfile)
        for name in ("context", "home"):
            (self.stage / name).mkdir()
        os.chown(self.stage / "home", uid, gid)
        q = shlex.quote
        s = str(self.stage)
        # The storage at one fixed path in every builder's namespace: ch-image's build cache
        # keeps absolute paths to it.
        STORAGE_MOUNT.mkdir(exist_ok=True)
        os.chmod(STORAGE_MOUNT, 0o755)
        binds = [f"mount --bind {q(str(holder))} {q(str(STORAGE_MOUNT))}"]
        if self.context is not None:
            binds += [f"mount --bind {q(str(self.context))} {q(s + '/context')}",
                      f"mount -o remount,bind,ro {q(s + '/context')}"]
        if self.tarball is not None:
            (self.stage / "rootfs.tar").touch()
            binds += [f"mount --bind -o ro {q(str(self.tarball))} {q(s + '/rootfs.tar')}"]
        inner = "\n".join([
            "set -eu", "ip link set lo up", "mount --make-rprivate /",
            *binds,  # before /tmp is replaced: a source may lie under the host's /tmp
            f"mount -t tmpfs -o size={q(BUILD_TMP_SIZE)},mode=1777 runner-build-tmp /tmp",
            "mount -t tmpfs -o size=64m,mode=1777,nosuid,nodev runner-build-shm /dev/shm",  # not the host's
            f"exec setpriv --reuid={uid} --regid={gid} --clear-groups --no-new-privs env -i USER=builder "
            f"HOME={q(s + '/home')} TMPDIR={q(s + '/home')} PATH=/usr/sbin:/usr/bin:/sbin:/bin "
            "GIT_AUTHOR_NAME=runner GIT_AUTHOR_EMAIL=runner@localhost GIT_COMMITTER_NAME=runner "
            "GIT_COMMITTER_EMAIL=runner@localhost "
            f"{SYSTEM_PYTHON} {q(s + '/bootstrap.py')} {q(s + '/bin')} -s {q(str(STORAGE_MOUNT / 'storage'))} \"$@\"",
        ])
        argv = ["unshare", "--net", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc", "--ipc", "--uts",
                "/bin/sh", "-c", inner, "ch-image"]
        return s, argv

    def __exit__(self, *_exc) -> None:
        shutil.rmtree(self.stage, ignore_errors=True)
        fcntl.flock(self.lock, fcntl.LOCK_UN)
        self.lock.close()


def _mkdtemp(parent: Path, prefix: str) -> str:
    import tempfile  # lazy: start-up (only builds stage a folder)
    return tempfile.mkdtemp(prefix=prefix, dir=parent)


def storage_name(tag: str) -> str:
    """The folder ``ch-image`` keeps an image in, from its tag (``a/b:c`` is ``a%b+c``)."""
    name = tag if ":" in tag.rsplit("/", 1)[-1] else f"{tag}:latest"
    return name.replace("/", "%").replace(":", "+")


def _substitute_from(line: str, build_args: Mapping[str, str]) -> str:
    match = _FROM.match(line)
    if not match:
        return line
    image = match.group(2)
    for key, value in build_args.items():
        image = image.replace("${" + key + "}", value).replace("$" + key, value)
    return match.group(1) + image + match.group(3)


def _step_line(line: str) -> str:
    """ch-image's instruction lines (`` 9. COPY ...``) as Docker's ``Step`` lines, which the
    build's failure reporting keys on."""
    match = re.match(r"^\s*(\d+)[.*]\s+(\S.*)$", line)
    return f"Step {match.group(1)} : {match.group(2)}\n" if match else line


def _metadata(folder: Path) -> dict:
    try:
        data = json.loads((folder / "ch" / "metadata.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_metadata(folder: Path, metadata: dict) -> None:
    (folder / "ch").mkdir(exist_ok=True)
    (folder / "ch" / "metadata.json").write_text(json.dumps(metadata, indent=2, sort_keys=True) + "\n")
    (folder / "ch" / "environment").write_text("".join(f"{k}={v}\n" for k, v in metadata.get("env", {}).items()))


def content_digest(folder: Path, env: Mapping[str, str]) -> str:
    """sha256 over every entry of the image's folder but ch-image's own (``ENGINE_FILES``),
    sorted by path: its type, permission bits, size and content (a link: its target), then
    the environment. Owners are left out: they are the builder's, not the image's."""
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        relative_root = os.path.relpath(root, folder)
        if relative_root == ".":
            dirs[:] = [d for d in dirs if d not in ENGINE_FILES]
            files = [f for f in files if f not in ENGINE_FILES]
        for name in sorted(dirs + files):
            path = os.path.join(root, name)
            relative = os.path.normpath(os.path.join(relative_root, name))
            info = os.lstat(path)
            mode = stat.S_IMODE(info.st_mode)
            if stat.S_ISLNK(info.st_mode):
                digest.update(f"l\0{relative}\0{os.readlink(path)}\n".encode("utf-8", "surrogateescape"))
            elif stat.S_ISDIR(info.st_mode):
                digest.update(f"d\0{relative}\0{mode:o}\n".encode("utf-8", "surrogateescape"))
            elif stat.S_ISREG(info.st_mode):
                digest.update(f"f\0{relative}\0{mode:o}\0{info.st_size}\0{sha256_file(Path(path))}\n"
                              .encode("utf-8", "surrogateescape"))
            else:
                digest.update(f"o\0{relative}\0{stat.S_IFMT(info.st_mode)}\0{mode:o}\n"
                              .encode("utf-8", "surrogateescape"))
    for key in sorted(env):
        digest.update(f"e\0{key}\0{env[key]}\n".encode())
    return digest.hexdigest()


def _tar_stream(process: subprocess.Popen) -> Generator[bytes, None, None]:
    try:
        assert process.stdout is not None
        while chunk := process.stdout.read(EXPORT_CHUNK_BYTES):
            yield chunk
        code = process.wait()
        if code != 0:
            error = process.stderr.read().decode("utf-8", "replace")[-300:] if process.stderr else ""
            raise EngineError(f"reading the image's files failed: {error.strip()}")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def _plain_env() -> dict[str, str]:
    """The environment of the host programs the engine runs: no virtual environment's Python."""
    return {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C",
            "USER": os.environ.get("USER") or "root"}
