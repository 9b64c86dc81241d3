"""The framework layer: the lock's wheels installed once into ``/opt/venv`` on a base image,
an image of its own that every entry with the same base and the same lock lines builds on.

An entry whose Dockerfile installs nothing itself (it copies no ``wheels/``) is built
``FROM ${BASE_IMAGE}`` where ``BASE_IMAGE`` is this image: the runner, not the entry, ran
``pip install --no-index --require-hashes`` on wheels it hash-checked, with no network, so
the layer holds exactly the lock (the inspection still accounts for every file of it by
the wheels' RECORDs). Its tag is a digest of the base image's id and the lock's requirement
lines (names, versions, hashes; comments and order do not count), so two entries that pin
the same packages share one layer: the second build installs nothing and the inspection
reads that layer once (``layers``).

The engine runs the install in a container with the wheels mounted read-only and commits
it (``Engine.install_layer``): the wheels are never copied into a layer and the venv is
written once, instead of the build context, a layer of wheels, the install and a copy of
the venv into a clean stage that an entry's own two-stage Dockerfile costs.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from runner import paths
from runner.engine.interface import BuildFailed, Engine, EngineError, LayerSpec
from runner.entry_build import wheelhouse
from runner.entry_build.dockerfile_policy import instructions
from runner.entry_build.lockfile import Pin
from runner.errors import BuildError, UserError
from runner.images import BaseImage

# Bumped when the install below changes, so an older layer is not reused.
FRAMEWORK_FORMAT = "runner-framework/1"
TAG_REPOSITORY = "runner/framework"
LABEL_PREFIX = "org.runner.framework"
VENV = "/opt/venv"
INPUTS_AT = "/tmp/wheels"  # under /tmp, a memory file system while it runs: no mount point is committed
INSTALL = LayerSpec(
    command=("/bin/sh", "-c",
             f"python3 -m venv {VENV} && {VENV}/bin/python3 -m pip install --no-index --find-links {INPUTS_AT} "
             f"--require-hashes --no-cache-dir --disable-pip-version-check -r {INPUTS_AT}/requirements.lock"),
    inputs_at=INPUTS_AT,
    output=VENV,
)


@dataclass(frozen=True)
class Framework:
    """The framework image an entry builds on."""

    image_id: str
    tag: str
    key: str
    built: bool  # False: found, built before (by this entry or another with the same lock lines)
    seconds: float


def installs_itself(dockerfile: Path) -> bool:
    """Does the Dockerfile install the lock itself (it copies ``wheels/`` from the context,
    the entry format before the framework layer)? Such an entry is built as it always was."""
    text = dockerfile.read_text(encoding="utf-8", errors="replace")
    for ins in instructions(dockerfile, text):
        if ins.name in ("COPY", "ADD") and any(word.strip('[],"\'').lstrip("./").startswith("wheels")
                                              for word in ins.args.split()):
            return True
    return False


def lock_lines(pins: list[Pin]) -> list[str]:
    """The lock as what pip installs: one requirement line per pin (name, version, marker,
    hashes), sorted; what the framework's tag is a digest of."""
    return sorted(pin.requirement_line() for pin in pins)


def framework_key(base_id: str, pins: list[Pin]) -> str:
    text = "\n".join([FRAMEWORK_FORMAT, base_id, *lock_lines(pins)])
    return hashlib.sha256(text.encode()).hexdigest()


def framework_tag(key: str) -> str:
    return f"{TAG_REPOSITORY}:{key[:24]}"


def find_framework(engine: Engine, base: BaseImage, pins: list[Pin]) -> Framework | None:
    """The framework image for ``pins`` on ``base``, when one was installed before (by this
    entry or another with the same lock lines)."""
    started = time.monotonic()
    key = framework_key(base.id, pins)
    found = engine.find_image(framework_tag(key))
    return None if found is None else Framework(found.id, framework_tag(key), key, False, time.monotonic() - started)


def install_framework(engine: Engine, base: BaseImage, pins: list[Pin], wheels: Callable[[], dict[str, Path]],
                      output: Callable[[str], None], timeout_s: float) -> Framework:
    """Install the framework image for ``pins`` on ``base`` from the wheelhouse's verified
    wheels (``wheels()``: key -> file, each hash-checked against the lock). ``output`` sees
    the install's output as it comes."""
    started = time.monotonic()
    key = framework_key(base.id, pins)
    tag = framework_tag(key)
    inputs = Path(tempfile.mkdtemp(prefix="framework-", dir=_inputs_root()))
    try:
        wheelhouse.link_into(wheels(), inputs)
        (inputs / "requirements.lock").write_text("".join(line + "\n" for line in lock_lines(pins)))
        labels = {LABEL_PREFIX: key, f"{LABEL_PREFIX}.base-image-id": base.id,
                  f"{LABEL_PREFIX}.packages": str(len(pins))}
        _install(engine, base, inputs, tag, labels, output, timeout_s)
    finally:
        shutil.rmtree(inputs, ignore_errors=True)
    image = engine.image(tag)
    return Framework(image.id, tag, key, True, time.monotonic() - started)


def _inputs_root() -> Path:
    root = paths.home() / "build-contexts"
    root.mkdir(parents=True, exist_ok=True)
    return root


def _install(engine: Engine, base: BaseImage, inputs: Path, tag: str, labels: dict[str, str],
             output: Callable[[str], None], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    log: list[str] = []
    try:
        stream = engine.install_layer(base.tag, inputs, INSTALL, tag, labels=labels)
        try:
            for text in stream:
                if text:
                    log.append(text)
                    output(text)
                if time.monotonic() > deadline:
                    raise UserError(f"installing the lock's wheels took longer than {timeout_s / 60:.0f} minutes",
                                    "set RUNNER_BUILD_TIMEOUT_S higher if the install is legitimately long")
        finally:
            stream.close()
    except BuildFailed as exc:
        raise BuildError(f"installing the lock's wheels on {base.tag} failed: {exc}",
                         "check that every pinned wheel installs on CPython 3.11 (`runner build -v` prints the log)",
                         build_log=log) from None
    except EngineError as exc:
        raise UserError(f"the engine refused to install the lock's wheels: {exc}",
                        "check `runner doctor`") from None
