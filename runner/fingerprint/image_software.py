"""Software versions inside an entry's image, as the frameworks themselves report them.

A short container (no network, read-only, no capabilities) runs ``python3 -c PROBE``;
the probe prints one JSON line. Versions come from the imported modules, not from pip
metadata, because a wheel's name can lie about the CUDA build it carries.
"""

from __future__ import annotations

import json

from runner import image_cache
from runner.engine.interface import READ_ONLY_PROBE, ContainerSpec, Engine, EngineError, NotFound, TimedOut
from runner.errors import UserError
from runner.frameworks import FRAMEWORKS

MARKER = "RUNNER_PROBE "
TIMEOUT_SECONDS = 180

# Runs inside the image with its own python3. Each framework is optional: absent -> null.
# Each framework's lines are its declaration's (runner/frameworks/<name>/), in the registry's order.
_PROBE_HEAD = r'''
import json, platform, sys

def attempt(fn):
    try:
        return fn()
    except Exception:
        return None

def load(name):
    try:
        return __import__(name)
    except Exception:
        return None

out = {"python": platform.python_version(), "python_executable": sys.executable,
       "libc": " ".join(platform.libc_ver()).strip() or None}

np = load("numpy")
out["numpy"] = getattr(np, "__version__", None) if np else None
'''
_PROBE_TAIL = r'''
ort = load("onnxruntime")
out["onnxruntime"] = None if ort is None else {
    "version": ort.__version__, "providers": attempt(ort.get_available_providers)}

trt = load("tensorrt")
out["tensorrt"] = None if trt is None else {"version": trt.__version__}

print("RUNNER_PROBE " + json.dumps(out), flush=True)
'''
PROBE = _PROBE_HEAD + "".join(framework.probe for framework in FRAMEWORKS.values()) + _PROBE_TAIL


def parse_probe_output(stdout: str) -> dict:
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARKER):
            return json.loads(line[len(MARKER):])
    raise ValueError("the probe printed no result line")


def capture_image(engine: Engine, image_ref: str) -> dict:
    """Run the probe in ``image_ref`` (a tag or image id) and return what it reports."""
    try:
        image = engine.image(image_ref)
    except NotFound:
        raise UserError(
            f"no image {image_ref} in the local Docker engine", "build it first with `runner build`"
        ) from None
    kept = image_cache.load("image-software", image.id)
    if kept is not None:
        return {"ref": image_ref, "id": image.id, "tags": list(image.tags), **kept}
    spec = ContainerSpec(image.id, [], [], entrypoint=["python3", "-c", PROBE], workdir=None,
                         env={"HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1"}, timeout_s=TIMEOUT_SECONDS,
                         label="fingerprint-probe", labels={"runner.role": "fingerprint-probe"}, confinement=READ_ONLY_PROBE)
    try:
        done = engine.run(spec)
    except TimedOut:
        raise UserError(
            f"the software probe in image {image_ref} ran over {TIMEOUT_SECONDS} s",
            "check that the image's python3 starts (docker run --rm IMAGE python3 -V)",
        ) from None
    except EngineError as err:
        # e.g. the image has no python3: the runtime cannot exec the entrypoint.
        raise UserError(
            f"could not run the software probe in image {image_ref}: {err}",
            "the image needs python3 on its PATH",
        ) from None
    code = done.exit_code
    stdout, stderr = done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
    try:
        found = parse_probe_output(stdout)
    except ValueError:
        tail = stderr.strip().splitlines()[-1:] or ["(no output)"]
        raise UserError(
            f"the software probe in image {image_ref} exited {code}: {tail[0]}",
            "the image needs a working python3 on its PATH",
        ) from None
    image_cache.store("image-software", image.id, found)
    return {"ref": image_ref, "id": image.id, "tags": list(image.tags), **found}
