"""Build an entry's image hermetically: base image, verified wheels, ``--network none``.

The image is tagged ``runner/entry/<name>:<content key>``. When an image with that tag
exists, nothing is rebuilt (a cache hit costs a hash of the entry folder and one look-up). Otherwise the legacy builder runs with no network, the image is labelled with
the entry's identity, and its SBOM is read from inside it and recorded on the host.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from runner import paths
from runner.background import Background
from runner.entry_build import context as build_context
from runner.entry_build import wheelhouse
from runner.entry_build.dockerfile_policy import check_dockerfile
from runner.entry_build.framework import VENV, Framework, find_framework, install_framework, installs_itself
from runner.entry_build.lockfile import Pin, normalise_name, parse_lock, refuse_data_packages
from runner.engine.host import DIFFERENCES_ARG, LOCKED_ARG
from runner.entry_build.sbom import read_base_content, read_sbom
from runner.engine.disk import require_free_space
from runner.engine.interface import BuildFailed, Engine, EngineError
from runner.errors import BuildError, UserError
from runner.images import BaseImage, ensure_base, find_base
from runner.manifest import Entry
from runner.report import Phase, reporter
from runner.safe_read import visible

BUILD_TIMEOUT_S = int(os.environ.get("RUNNER_BUILD_TIMEOUT_S", "2700"))
MIN_FREE_GIB = float(os.environ.get("RUNNER_MIN_FREE_GIB", "4"))
TAG_REPOSITORY = "runner/entry"
LABEL_PREFIX = "org.runner.entry"

# Build output that means a step tried to use the network (which builds never have).
_NETWORK_SIGNS = re.compile(
    r"Temporary failure in name resolution|Network is unreachable|Could not resolve host|"
    r"Name or service not known|NewConnectionError|Failed to establish a new connection|"
    r"URLError|nodename nor servname|No address associated with hostname|Connection refused",
    re.IGNORECASE,
)

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_BUILDER_CHATTER = ("Removing intermediate container", "--->", "Step ")
_STEP = re.compile(r"^Step (\d+)(/\d+)? : (.*)$")  # ch-image's, translated, has no total
_WHEEL = re.compile(r"^Processing \S*?([^/\s]+)\.whl")
_INSTALLING = "Installing collected packages:"


class BuildProgress:
    """The build's progress from the legacy builder's output: the Dockerfile step (n of m)
    and, in a pip step, the wheel being processed and the packages being installed (pip is
    silent for tens of seconds while it unpacks torch: the line says what it waits for).

    Everything after ``Step n/m :`` is the entry's text (its Dockerfile, its RUN steps'
    output): it is shown as the entry's, quoted, with control characters made visible, so
    an entry's output can never read as a line of the runner's own."""

    def __init__(self, phase: Phase, sizes: dict[str, int] | None = None):
        self.phase = phase
        self.sizes = sizes or {}  # the context's wheels' sizes by package name: the slow ones first
        self.step = ""  # ``step 4/9``
        self.instruction = ""
        self._partial = ""

    def feed(self, text: str) -> None:
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()
        for line in lines:
            self._line(_ANSI.sub("", line).strip())

    def _line(self, line: str) -> None:
        if m := _STEP.match(line):
            self.step, self.instruction = f"step {m[1]}{m[2] or ''}", m[3]
            self.phase.update(f"{self.step}, {self._quoted(self.instruction, 48)}", step=True)
        elif m := _WHEEL.match(line):
            self.phase.update(f"{self.step}, pip processing {self._quoted(m[1], 40)}")
        elif line.startswith(_INSTALLING):
            names = [n.strip() for n in line.removeprefix(_INSTALLING).split(",") if n.strip()]
            big = sorted(names, key=lambda n: -self.sizes.get(normalise_name(n), 0))[:3]
            more = " ..." if len(names) > len(big) else ""
            self.phase.update(f"{self.step}, pip installing {len(names)} packages "
                              f"({self._quoted(', '.join(big), 40)}{more})", step=True)

    @staticmethod
    def _quoted(text: str, width: int) -> str:
        """The entry's text, marked as such: quoted, control characters visible, shortened."""
        shown = visible(text)
        return f"entry: \"{shown[:width - 3] + '...' if len(shown) > width else shown}\""


def wheel_sizes(folder: Path) -> dict[str, int]:
    """``{package: bytes}`` of the wheels in a build context's ``wheels/`` (a wheel's file
    name starts with its distribution name)."""
    if not folder.is_dir():
        return {}
    return {normalise_name(p.name.split("-", 1)[0]): p.stat().st_size for p in folder.glob("*.whl")}


@dataclass
class BuiltImage:
    image_id: str
    tag: str
    base: BaseImage
    labels: dict[str, str]
    sbom: dict[str, list[dict[str, str]]]
    cached: bool
    seconds: float
    log: list[str] = field(default_factory=list, repr=False)


def image_tag(entry_name: str, key: str) -> str:
    return f"{TAG_REPOSITORY}/{entry_name}:{key[:20]}"


class BuildInputs:
    """What a build needs that does not depend on the entry's code: the base image and the
    lock's verified wheels. ``start`` fetches both at once in the background (on a fresh
    machine the base image's debootstrap is the longest wait of all), so that the caller
    can stage the data meanwhile; ``base()`` and ``wheels()`` wait for them (and raise what
    fetching them raised). ``ready`` makes neither: the build then does both itself, in turn."""

    def __init__(self, base: Callable[[], BaseImage], wheels: Callable[[], dict[str, Path]]):
        self._base, self._wheels = base, wheels

    @classmethod
    def ready(cls, name: str, engine: Engine, pins: list[Pin]) -> BuildInputs:
        return cls(lambda: ensure_base(name, engine), lambda: wheelhouse.resolve(pins))

    @classmethod
    def start(cls, entry: Entry, engine: Engine, before: Callable[[], None] = lambda: None) -> BuildInputs | None:
        """Start fetching the entry's base image and wheels, once ``before()`` returned; None
        when there is nothing to fetch (an engine on the host's root, or the entry's image is
        built already: ``before`` is not called)."""
        if engine.own_root or not entry.path.is_dir():
            return None
        try:
            pins = parse_lock(entry.lock_path)
            found = find_base(entry.base_image, engine)
            if found is not None and engine.find_image(
                    image_tag(entry.name, build_context.content_key(entry.path, found.id, entry.lock_path))):
                return None
        except UserError:
            return None  # the build says what is wrong, in its turn
        before()
        base, wheels = Background(lambda: ensure_base(entry.base_image, engine)), Background(
            lambda: wheelhouse.resolve(pins))
        return cls(base.result, wheels.result)

    def base(self) -> BaseImage:
        return self._base()

    def wheels(self) -> dict[str, Path]:
        return self._wheels()


def build_entry(
    entry: Entry,
    engine: Engine,
    *,
    no_cache: bool = False,
    base_image: str | None = None,
    lock_path: Path | None = None,
    inputs: BuildInputs | None = None,
) -> BuiltImage:
    """Build (or find) the entry's image. ``base_image``/``lock_path`` override the
    manifest's (smoke runs); ``no_cache`` rebuilds every layer; ``inputs``, the base image
    and wheels ``BuildInputs.start`` began fetching (for the manifest's base and lock)."""
    started = time.monotonic()
    if not entry.path.is_dir():
        raise UserError(f"no entry folder at {entry.path}", "pass an entry folder such as entries/mnist-cnn-cpu")
    check_dockerfile(entry.dockerfile_path)  # before the engine can fetch anything it names
    lock_path = Path(lock_path) if lock_path else entry.lock_path
    pins = parse_lock(lock_path)  # refuses unpinned or unhashed lines before any work
    refuse_data_packages(pins, entry.task.id, lock_path)  # ...and the task's own data set
    if inputs is None or base_image is not None or lock_path != entry.lock_path:
        inputs = BuildInputs.ready(base_image or entry.base_image, engine, pins)
    base = inputs.base()
    key = build_context.content_key(entry.path, base.id, lock_path)
    tag = image_tag(entry.name, key)
    labels = _labels(entry, key, base, lock_path)

    with _entry_lock(entry.name):
        if not no_cache:
            found = engine.find_image(tag)
            if found is not None:  # built before from verified wheels: nothing to redo
                sbom = _recorded_sbom(found.id)
                if sbom is None or "base" not in sbom:  # recorded before the base's content was
                    sbom = _record(entry, found.id, tag, base, labels, _read_sbom(engine, tag, base))
                return BuiltImage(found.id, tag, base, labels, sbom, True,
                                  time.monotonic() - started)
        _check_disk(engine)
        # An engine on the host's own root installs nothing: it compares the host with the lock.
        # An entry that installs the lock itself gets the wheels in its context; any other is
        # built on the framework layer, the lock installed by the runner (``framework``).
        itself = not engine.own_root and installs_itself(entry.dockerfile_path)
        wheels = inputs.wheels() if itself else {}
        if engine.own_root:
            args = host_build_args(engine, pins)
        elif itself:
            args = {"BASE_IMAGE": base.tag}
        else:
            framework = find_framework(engine, base, pins) or _install_framework(engine, base, pins, inputs)
            args = {"BASE_IMAGE": framework.tag}
            labels = {**labels, f"{LABEL_PREFIX}.framework-image-id": framework.image_id}
        ctx = build_context.make_context(entry.path, wheels, lock_path)
        try:
            image_id, log = _build(engine, ctx, tag, args, labels, no_cache, entry.name)
        finally:
            build_context.remove_context(ctx)
        sbom = _record(entry, image_id, tag, base, labels, _read_sbom(engine, tag, base))
    return BuiltImage(image_id, tag, base, labels, sbom, False, time.monotonic() - started, log)


def _install_framework(engine: Engine, base: BaseImage, pins: list[Pin], inputs: BuildInputs) -> Framework:
    """The lock installed into the framework image, pip's progress shown as the build's."""
    with reporter().phase("framework", f"installing the lock's {len(pins)} packages into {VENV}") as phase:
        wheels = inputs.wheels()
        progress = BuildProgress(phase, {key: path.stat().st_size for key, path in wheels.items()})
        progress.step = "venv"
        return install_framework(engine, base, pins, lambda: wheels, progress.feed, BUILD_TIMEOUT_S)


def _read_sbom(engine: Engine, tag: str, base: BaseImage) -> dict:
    """The image's packages, and its base's content digests (what drift compares)."""
    return {**read_sbom(engine, tag), "base": read_base_content(engine, base)}


def _labels(entry: Entry, key: str, base: BaseImage, lock_path: Path) -> dict[str, str]:
    digests = entry.digests()
    digests["lock"] = wheelhouse.sha256_file(lock_path)
    return {
        LABEL_PREFIX: entry.name,
        f"{LABEL_PREFIX}.manifest-sha256": digests["manifest"],
        f"{LABEL_PREFIX}.dockerfile-sha256": digests["dockerfile"],
        f"{LABEL_PREFIX}.lock-sha256": digests["lock"],
        f"{LABEL_PREFIX}.content-key": key,
        f"{LABEL_PREFIX}.base-image": base.tag,
        f"{LABEL_PREFIX}.base-image-id": base.id,
    }


def _check_disk(engine: Engine) -> None:
    minimum = int(MIN_FREE_GIB * 1024**3)
    root = engine.data_root()
    if root is not None and root.exists():  # a local engine: its disk is the one that fills
        require_free_space(root, minimum, "building an entry image")
    require_free_space(paths.wheelhouse_dir(), minimum // 4, "the wheelhouse")


def host_build_args(engine: Engine, pins: list) -> dict[str, str]:
    """An engine on the host's own root builds nothing: it is told how the host's packages
    differ from the lock (each pin missing or at another version), to say and keep."""
    installed = {normalise_name(name): version for name, version in engine.host_packages()}
    lines = []
    for pin in pins:
        have = installed.get(pin.key)
        if have is None:
            lines.append(f"{pin.name}=={pin.version}: not installed on this host")
        elif have != pin.version:
            lines.append(f"{pin.name}=={pin.version}: this host has {have}")
    return {DIFFERENCES_ARG: "\n".join(lines), LOCKED_ARG: str(len(pins))}


def _build(engine: Engine, ctx: Path, tag: str, build_args: dict[str, str], labels: dict[str, str],
           no_cache: bool, name: str) -> tuple[str, list[str]]:
    deadline = time.monotonic() + BUILD_TIMEOUT_S
    log: list[str] = []
    step = ""
    try:
        with reporter().phase("build", f"{name}, sending the build context") as phase:
            stream = engine.build_image(ctx, "entry/Dockerfile", tag, build_args=build_args,
                                        labels=labels, no_cache=no_cache)
            progress = BuildProgress(phase, wheel_sizes(ctx / "wheels"))
            for text in stream:
                if text:
                    log.append(text)
                    progress.feed(text)
                if text.startswith("Step "):
                    step = text.strip()
                if time.monotonic() > deadline:
                    stream.close()
                    raise UserError(
                        f"building {name} took longer than {BUILD_TIMEOUT_S // 60} minutes (at {step})",
                        "set RUNNER_BUILD_TIMEOUT_S higher if the build is legitimately long",
                    )
        return engine.image(tag).id, log
    except BuildFailed as exc:
        raise _build_failure(name, step, str(exc), log) from None
    except EngineError as exc:
        raise UserError(f"the engine refused to build {name}: {exc}",
                        "check `runner doctor` and the entry's Dockerfile") from None


def _failing_step_output(log: list[str]) -> list[str]:
    """The log from the last ``Step`` line on: what the failing step printed, and no
    earlier step's (a pip step's ``--require-hashes`` must not explain a later failure)."""
    starts = [i for i, text in enumerate(log) if text.startswith("Step ")]
    return log[starts[-1]:] if starts else log


def _build_failure(name: str, step: str, error: str, log: list[str]) -> BuildError:
    err = _explain_build_failure(name, step, error, _failing_step_output(log))
    return BuildError(err.problem, err.fix, build_log=[*log, error])  # `runner build -v` prints the log


def _explain_build_failure(name: str, step: str, error: str, log: list[str]) -> UserError:
    output = _ANSI.sub("", "".join(log[-40:]) + error)
    lines = [line.strip() for line in output.splitlines()
             if line.strip() and not line.strip().startswith(_BUILDER_CHATTER)]
    tail = " | ".join(lines[-2:])[-500:]
    if _NETWORK_SIGNS.search(output):
        return UserError(
            f"building {name} failed because a step tried to reach the network ({step}): {tail}",
            "entry builds have no network; put Python dependencies in the hash-pinned lock "
            "(the runner supplies them as wheels/) and remove downloads from the Dockerfile",
        )
    if "DO NOT MATCH" in output or re.search(r"hashes are required|requires? hashes|--require-hashes mode", output,
                                               re.IGNORECASE) and "pip" in output.lower():
        return UserError(f"pip refused a wheel while building {name} ({step}): {tail}",
                         "regenerate the lock, or delete the wheel from the wheelhouse and rebuild")
    return UserError(f"building {name} failed at {step or 'the start'}: {tail}",
                     "fix the Dockerfile step shown (full output: runner build -v)")


def _record_path(image_id: str) -> Path:
    return paths.home() / "builds" / f"{image_id.replace('sha256:', '')}.json"


def _record(entry: Entry, image_id: str, tag: str, base: BaseImage, labels: dict,
            sbom: dict) -> dict:
    record = {
        "entry": entry.name, "image_id": image_id, "tag": tag,
        "base": {"name": base.name, "tag": base.tag, "id": base.id},
        "labels": labels, "sbom": sbom, "built_at": time.time(),
    }
    path = _record_path(image_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True))
    os.replace(tmp, path)
    return sbom


def _recorded_sbom(image_id: str) -> dict | None:
    try:
        return json.loads(_record_path(image_id).read_text())["sbom"]
    except (OSError, ValueError, KeyError):
        return None


class _entry_lock:
    """One build of an entry at a time across processes."""

    def __init__(self, name: str):
        folder = paths.home() / "locks"
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"entry-{name}.lock"

    def __enter__(self):
        self.handle = open(self.path, "w")
        fcntl.flock(self.handle, fcntl.LOCK_EX)

    def __exit__(self, *exc):
        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()
