"""Software versions inside an entry's image, as the frameworks themselves report them.

A short container (no network, read-only, no capabilities) runs ``python3 -c PROBE``;
the probe prints one JSON line. Versions come from the imported modules, not from pip
metadata, because a wheel's name can lie about the CUDA build it carries.
"""

from __future__ import annotations

import json
from typing import Any

from runner import image_cache
from runner.errors import UserError
from runner.engine.containers import owned_labels
from runner.engine.kinds import create_options

MARKER = "RUNNER_PROBE "
TIMEOUT_SECONDS = 180

# Runs inside the image with its own python3. Each framework is optional: absent -> null.
PROBE = r'''
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

torch = load("torch")
out["torch"] = None if torch is None else {
    "version": torch.__version__,
    "cuda": torch.version.cuda,
    "cudnn": attempt(lambda: torch.backends.cudnn.version()),
    "cuda_available": attempt(torch.cuda.is_available),
    "mkldnn": attempt(torch.backends.mkldnn.is_available),
    "cpu_bf16": attempt(lambda: bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())),
    "cuda_bf16": attempt(lambda: torch.cuda.is_available() and torch.cuda.is_bf16_supported()),
    "cpu_capability": attempt(lambda: torch.backends.cpu.get_cpu_capability()),
    "threads": attempt(torch.get_num_threads),
}

tf = load("tensorflow")
if tf is None:
    out["tensorflow"] = None
else:
    build = attempt(lambda: dict(tf.sysconfig.get_build_info())) or {}
    out["tensorflow"] = {"version": tf.__version__, "cuda": build.get("cuda_version"),
                         "cudnn": build.get("cudnn_version")}

mx = load("mxnet")
out["mxnet"] = None if mx is None else {"version": mx.__version__}

ort = load("onnxruntime")
out["onnxruntime"] = None if ort is None else {
    "version": ort.__version__, "providers": attempt(ort.get_available_providers)}

trt = load("tensorrt")
out["tensorrt"] = None if trt is None else {"version": trt.__version__}

print("RUNNER_PROBE " + json.dumps(out), flush=True)
'''


def parse_probe_output(stdout: str) -> dict:
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARKER):
            return json.loads(line[len(MARKER):])
    raise ValueError("the probe printed no result line")


def capture_image(client: Any, image_ref: str) -> dict:
    """Run the probe in ``image_ref`` (a tag or image id) and return what it reports."""
    from docker.errors import APIError, ImageNotFound  # lazy: heavy (docker)
    from requests.exceptions import RequestException  # lazy: heavy (requests, as docker)

    try:
        image = client.images.get(image_ref)
    except ImageNotFound:
        raise UserError(
            f"no image {image_ref} in the local Docker engine", "build it first with `runner build`"
        ) from None
    kept = image_cache.load("image-software", image.id)
    if kept is not None:
        return {"ref": image_ref, "id": image.id, "tags": list(image.tags), **kept}
    container = client.containers.create(
        image.id,
        entrypoint=["python3", "-c", PROBE],
        command=[],
        network_mode="none",
        read_only=True,
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        tmpfs={"/tmp": "rw,size=64m"},
        environment={"HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1"},
        labels={"runner.role": "fingerprint-probe", **owned_labels("fingerprint-probe")},
        **create_options(),
    )
    try:
        container.start()
        try:
            status = container.wait(timeout=TIMEOUT_SECONDS)
        except RequestException:
            container.kill()
            raise UserError(
                f"the software probe in image {image_ref} ran over {TIMEOUT_SECONDS} s",
                "check that the image's python3 starts (docker run --rm IMAGE python3 -V)",
            ) from None
        stdout = container.logs(stdout=True, stderr=False).decode(errors="replace")
        stderr = container.logs(stdout=False, stderr=True).decode(errors="replace")
    except APIError as err:
        # e.g. the image has no python3: the runtime cannot exec the entrypoint.
        raise UserError(
            f"could not run the software probe in image {image_ref}: {err.explanation or err}",
            "the image needs python3 on its PATH",
        ) from None
    finally:
        try:
            container.remove(force=True)
        except APIError:
            pass
    code = status.get("StatusCode")
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
