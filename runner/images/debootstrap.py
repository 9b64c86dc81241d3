"""Build a base image from Debian packages: bootstrap a root file system (``mmdebstrap``
where it is installed, else ``debootstrap``), strip what differs between two runs, pack it as
a sorted tarball with clamped mtimes, ``docker import``.

The two tools install the same packages at the same versions (mmdebstrap with its
``merged-usr`` hook, as debootstrap merges ``/usr`` itself: without it mmdebstrap pulls in
``usrmerge`` and perl); mmdebstrap downloads them in parallel and unpacks them in one dpkg
call, so on a 2-core host bookworm's minbase with Python took 19.2 s where debootstrap took
39.8 s (one after the other, from deb.debian.org, page cache dropped before each). The tool
and its version are kept in the base's record. ``RUNNER_BASE_TOOL=debootstrap`` chooses the
older tool where both are installed.

Two builds of one recipe from one mirror state give the same file contents: logs, caches,
apt lists and device nodes are removed, Python byte code is recompiled in hash mode (no
build-time timestamps), and the tarball is sorted by name with numeric owners and every
mtime clamped to the recipe's SOURCE_DATE_EPOCH (which debootstrap's tools also read: the
password-change days in ``/etc/shadow`` are that date's). Every process runs with umask
022, so modes do not follow the caller's umask. The tarball's sha256 is the imported
layer's diff id, so two builds from one mirror state give the same layer digest; the image
id still differs (``docker import`` writes its own creation time into the config).

What cannot be pinned here: the mirror state. ``deb.debian.org`` moves on (security and
point releases), so a later build may resolve newer package versions; pinning them needs
``snapshot.debian.org`` (``RUNNER_DEBIAN_MIRROR``), which a machine without network to it
cannot reach. Instead each build records what it resolved (``base_record``): the suite's
Release date and version, and every installed package with its version.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from runner import paths
from runner.errors import UserError
from runner.fingerprint.memory import read_meminfo
from runner.images.recipe import Recipe
from runner.report import reporter
from runner.safe_read import visible

DEBOOTSTRAP_TIMEOUT_S = 30 * 60
# Paths (relative to the root) whose contents are build-run noise, not the image.
_NOISE_GLOBS = [
    "var/log/**/*",
    "var/cache/apt/*.bin",
    "var/cache/apt/archives/*.deb",
    "var/lib/apt/lists/*",
    "var/cache/debconf/*-old",
    "var/lib/dpkg/*-old",
    "var/cache/ldconfig/aux-cache",
    "etc/resolv.conf",
    "dev/*",
]


TOOLS = ("mmdebstrap", "debootstrap")  # in the order they are preferred
TOOL_ENV = "RUNNER_BASE_TOOL"
MERGED_USR_HOOK = Path("/usr/share/mmdebstrap/hooks/merged-usr")


def bootstrap_tool() -> tuple[str, str] | None:
    """(name, path) of the tool that builds base images here: ``RUNNER_BASE_TOOL`` where it
    names one, else the first of ``TOOLS`` installed; None when none is."""
    wanted = os.environ.get(TOOL_ENV, "").strip()
    if wanted and wanted not in TOOLS:
        raise UserError(f"{TOOL_ENV}={wanted!r} is not a base image tool",
                        f"set it to one of {', '.join(TOOLS)}, or unset it")
    for name in (wanted,) if wanted else TOOLS:
        if (path := shutil.which(name)) is not None:
            return name, path
    return None


def require_root_and_debootstrap() -> tuple[str, str]:
    """The tool (name, path) that builds base images here; UserError without root or a tool."""
    if os.geteuid() != 0:
        raise UserError(
            "building a Debian base image needs root (debootstrap creates device files and chroots)",
            "run `sudo runner images build NAME`, or `sudo runner setup`",
        )
    tool = bootstrap_tool()
    if tool is None:
        wanted = os.environ.get(TOOL_ENV, "").strip()
        raise UserError(
            f"{wanted + ' is not' if wanted else 'neither mmdebstrap nor debootstrap is'} installed, "
            "so base images cannot be built here",
            f"run `sudo runner setup` or `sudo apt-get install -y {wanted or 'mmdebstrap'}`",
        )
    return tool


def tool_version(name: str) -> str:
    """The Debian package version of the tool, or '' where dpkg cannot say."""
    if shutil.which("dpkg-query") is None:
        return ""
    return subprocess.run(["dpkg-query", "-W", "-f", "${Version}", name],
                          capture_output=True, text=True, check=False).stdout.strip()


def build_rootfs_tarball(recipe: Recipe, workdir: Path, log_path: Path) -> Path:
    """Bootstrap the recipe into ``workdir/rootfs`` and return the path of its tarball."""
    name, tool = require_root_and_debootstrap()
    rootfs = workdir / "rootfs"
    env = _build_env(recipe)
    options = [f"--variant={recipe.variant}", f"--components={','.join(recipe.components)}",
               f"--include={','.join(recipe.packages)}"]
    if name == "mmdebstrap":
        # Merged /usr as debootstrap makes it; apt's lists kept for debian_release (removed
        # with the noise below); a plain folder, built as root.
        options += ["--mode=root", "--format=directory", "--skip=cleanup/apt/lists"]
        if MERGED_USR_HOOK.is_dir():
            options.append(f"--hook-dir={MERGED_USR_HOOK}")
    _run([tool, *options, recipe.suite, str(rootfs), recipe.effective_mirror], env, log_path,
         what=f"{name} of {recipe.suite}")
    release = debian_release(rootfs)  # before the apt lists go
    _normalise(rootfs, recipe, env, log_path)
    tarball = workdir / "rootfs.tar"
    _run(
        [
            "tar", "--create", "--file", str(tarball), "--format=gnu", "--sort=name",
            f"--mtime=@{recipe.source_date_epoch}", "--clamp-mtime", "--numeric-owner",
            "--directory", str(rootfs), ".",
        ],
        env, log_path, what="packing the root file system",
    )
    record = {
        "recipe": recipe.name, "recipe_sha256": recipe.content_hash, "suite": recipe.suite,
        "mirror": recipe.effective_mirror, "source_date_epoch": recipe.source_date_epoch,
        "tool": {"name": name, "version": tool_version(name)},
        "debian_release": release, "packages": installed_packages(rootfs),
        "layer": f"sha256:{_sha256(tarball)}",  # the diff id docker import will give it
    }
    (workdir / RECORD_NAME).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return tarball


RECORD_NAME = "base-record.json"


def base_record(tarball: Path) -> dict:
    """What the build of ``tarball`` resolved (written beside it by build_rootfs_tarball)."""
    return json.loads((tarball.parent / RECORD_NAME).read_text())


def debian_release(rootfs: Path) -> dict:
    """Date, Suite and Version of the Release file debootstrap fetched: which state of the
    mirror the packages came from (the date snapshot.debian.org would need to pin it)."""
    lists = rootfs / "var/lib/apt/lists"
    for path in sorted(lists.glob("*_InRelease")) + sorted(lists.glob("*_Release")):
        fields: dict[str, str] = {}
        for line in path.read_text(errors="replace").splitlines():
            if not line.strip() or line.startswith("-----BEGIN PGP SIGNATURE"):
                if fields:
                    break
                continue
            key, sep, value = line.partition(":")
            if sep and not line.startswith(" ") and key in ("Date", "Suite", "Codename", "Version"):
                fields[key.lower()] = value.strip()
        if fields:
            return fields
    return {}


def installed_packages(rootfs: Path) -> dict[str, str]:
    """{package: version} from dpkg's status file (installed packages only)."""
    status = rootfs / "var/lib/dpkg/status"
    packages: dict[str, str] = {}
    if not status.is_file():
        return packages
    for stanza in status.read_text(errors="replace").split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line and not line.startswith(" "))
        if fields.get("Package") and "installed" in fields.get("Status", "").split()[-1:]:
            packages[fields["Package"]] = fields.get("Version", "")
    return dict(sorted(packages.items()))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _build_env(recipe: Recipe) -> dict[str, str]:
    env = {
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        "LC_ALL": "C",
        "DEBIAN_FRONTEND": "noninteractive",
        "SOURCE_DATE_EPOCH": str(recipe.source_date_epoch),
        "PYTHONHASHSEED": "0",
        # Byte code is compiled once, explicitly, in hash mode (see _recompile_python).
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    for proxy in ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        if proxy in os.environ:
            env[proxy] = os.environ[proxy]
    return env


def _normalise(rootfs: Path, recipe: Recipe, env: dict[str, str], log_path: Path) -> None:
    for pattern in _NOISE_GLOBS:
        for path in sorted(rootfs.glob(pattern), reverse=True):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
    (rootfs / "etc/hostname").write_text("localhost\n")
    machine_id = rootfs / "etc/machine-id"
    if machine_id.exists():
        machine_id.write_text("")
    # The recipe's mirror, not an override: where we fetched from is not image content.
    (rootfs / "etc/apt/sources.list").write_text(
        f"deb {recipe.mirror} {recipe.suite} {' '.join(recipe.components)}\n"
    )
    _recompile_python(rootfs, env, log_path)


def _recompile_python(rootfs: Path, env: dict[str, str], log_path: Path) -> None:
    """Replace install-time byte code (which embeds timestamps) with hash-checked byte code.
    One process (no -j): the chroot has no /dev/shm for multiprocessing's locks."""
    dirs = sorted(str(p.relative_to(rootfs)) for p in (rootfs / "usr/lib").glob("python3*"))
    if not dirs or not (rootfs / "usr/bin/python3").exists():
        return
    for cache in sorted(rootfs.glob("usr/lib/python3*/**/__pycache__")):
        shutil.rmtree(cache, ignore_errors=True)
    _run(
        ["chroot", str(rootfs), "/usr/bin/python3", "-m", "compileall", "-q",
         "--invalidation-mode", "unchecked-hash", *("/" + d for d in dirs)],
        env, log_path, what="recompiling Python byte code",
    )


def _run(command: list[str], env: dict[str, str], log_path: Path, *, what: str) -> None:
    with log_path.open("ab") as log, reporter().phase("base", what) as phase:
        log.write(f"$ {' '.join(command)}\n".encode())
        log.flush()
        start = log.tell()
        proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_fixed_umask)
        deadline = time.monotonic() + DEBOOTSTRAP_TIMEOUT_S
        shown = ""
        while proc.poll() is None:
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                raise UserError(
                    f"{what} did not finish in {DEBOOTSTRAP_TIMEOUT_S // 60} minutes (log: {log_path})",
                    "check the mirror is reachable, or set RUNNER_DEBIAN_MIRROR to a closer one",
                )
            if (stage := _stage(log_path, start)) != shown:
                shown = stage
                phase.update(f"{what}: {stage}", step=True)
            time.sleep(0.5)
    if proc.returncode != 0:
        tail = _tail(log_path)
        raise UserError(
            f"{what} failed (exit {proc.returncode}): {tail} (full log: {log_path})",
            "check the mirror and package names in the recipe, and free disk space",
        )


def _stage(log_path: Path, start: int) -> str:
    """The tool's stage (the verb of its last ``I: Retrieving``/``Extracting``/... line, or of
    mmdebstrap's ``I: downloading packages with apt...``) from the log written since
    ``start``; the line itself holds package names and counts that change too often for a log
    line each."""
    with log_path.open("rb") as log:
        log.seek(max(start, log.seek(0, 2) - 4096))
        lines = [line for line in log.read().decode(errors="replace").splitlines() if line.startswith("I: ")]
    return visible(lines[-1].removeprefix("I: ").split(" ", 1)[0].lower()) if lines else ""


def _fixed_umask() -> None:
    """Files the build's tools create get the same modes whatever the caller's umask."""
    os.umask(0o022)


def _tail(log_path: Path, lines: int = 3) -> str:
    text = log_path.read_text(errors="replace").strip().splitlines()
    return " | ".join(line.strip() for line in text[-lines:])


# The root file system is built in memory when the host has it to spare: dpkg syncs every
# file it unpacks, which on a disk made debootstrap take 2 min 57 s where a memory file
# system took 1 min 48 s (the same recipe, one after the other, on a loaded 2-core host).
TMPFS_BYTES = int(float(os.environ.get("RUNNER_BASE_TMPFS_GIB", "3")) * 1024**3)


def make_workdir(recipe: Recipe) -> Path:
    """A fresh folder for the build: a memory file system of ``TMPFS_BYTES`` mounted on it
    when the host has twice that available (a build that does not fit fails on its own and
    says so; RUNNER_BASE_TMPFS_GIB=0 builds on the disk)."""
    parent = paths.home() / "image-builds"
    parent.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix=f"{recipe.name}-", dir=parent))
    if TMPFS_BYTES > 0 and read_meminfo().get("MemAvailable", 0) >= 2 * TMPFS_BYTES:
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_BYTES},mode=0755", "tmpfs", str(workdir)],
                       check=False, capture_output=True)  # on the disk when it cannot be mounted
    return workdir


def remove_workdir(workdir: Path) -> None:
    """Unmount anything debootstrap left mounted under the root (after a failure), then delete."""
    mounts = []
    with open("/proc/mounts") as f:
        for line in f:
            point = line.split()[1].replace("\\040", " ")
            if point == str(workdir) or point.startswith(str(workdir) + "/"):
                mounts.append(point)
    for point in sorted(mounts, key=len, reverse=True):
        subprocess.run(["umount", "-l", point], check=False, capture_output=True)
    if not mounts or all(not os.path.ismount(m) for m in mounts):
        shutil.rmtree(workdir, ignore_errors=True)
