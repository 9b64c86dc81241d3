"""What is inside a built image, read from the image itself (not from the lock):
Python distributions with versions, Debian packages with versions, and what its base image
holds by content (``base``: layer digests and a digest of every file), which drift compares
instead of the base image's id (an id embeds the time ``docker import`` ran)."""

from __future__ import annotations

import hashlib
import json

from runner.errors import UserError
from runner.engine.interface import AS_BUILT, ContainerSpec, Engine, TimedOut
from runner.entry_build.image_inspection import base_file_index
from runner.frameworks import FRAMEWORKS
from runner.images import LABEL_BASE_TOOL, LABEL_DEBIAN_RELEASE

SBOM_TIMEOUT_S = 900
# Runs inside the image with its own Python (the entry's venv, first on PATH), as the image's user.
_PROBE = r"""
import importlib.metadata as md, json, subprocess
python = sorted({(d.metadata["Name"], d.version) for d in md.distributions() if d.metadata["Name"]})
try:
    out = subprocess.run(["dpkg-query", "-W", "-f", "${Package}\t${Version}\n"],
                         capture_output=True, text=True, check=True).stdout
    debian = sorted(tuple(line.split("\t", 1)) for line in out.splitlines() if "\t" in line)
except (OSError, subprocess.CalledProcessError):
    debian = []
print(json.dumps({"python": [{"name": n, "version": v} for n, v in python],
                  "debian": [{"name": n, "version": v} for n, v in debian]}))
"""


def read_sbom(engine: Engine, image: str) -> dict[str, list[dict[str, str]]]:
    spec = ContainerSpec(image, ["python3", "-c", _PROBE], [], entrypoint=[], workdir=None, label="sbom",
                         confinement=AS_BUILT, timeout_s=SBOM_TIMEOUT_S)
    try:
        done = engine.run(spec)
    except TimedOut:
        raise UserError(f"listing the packages inside {image} ran over {SBOM_TIMEOUT_S} s",
                        "check that the image's python3 starts (docker run --rm IMAGE python3 -V)") from None
    if done.exit_code != 0:
        raise UserError(
            f"could not list the packages inside {image}: {done.stderr.decode(errors='replace')[-300:]}",
            "the image needs python3 on its PATH (the base images provide it)",
        )
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


def read_base_content(engine: Engine, base) -> dict:
    """``sbom["base"]`` for a ``runner.images.BaseImage``: its tag, its layers' diff ids (the
    sha256 of each layer's uncompressed tar: equal for two reproducible builds, while the
    image id differs), a sha256 over every regular file's path, size and sha256 (equal when
    only the tar's metadata differs), the Debian Release its packages came from, and the tool
    that bootstrapped it (None for a base made before it was recorded)."""
    image = engine.image(base.id)
    index = base_file_index(engine, base.id)
    return {
        "tag": base.tag,
        "layers": list(image.layers),
        "files": len(index),
        "files_sha256": files_digest(index),
        "debian_release": image.labels.get(LABEL_DEBIAN_RELEASE),
        "tool": image.labels.get(LABEL_BASE_TOOL),
    }


def files_digest(index: dict) -> str:
    """sha256 over ``path size sha256`` lines of a file index, sorted by path."""
    digest = hashlib.sha256()
    for path in sorted(index):
        size, sha = index[path][:2]
        digest.update(f"{path}\0{size}\0{sha}\n".encode())
    return digest.hexdigest()


def version_of(sbom: dict, name: str, kind: str = "python") -> str | None:
    wanted = name.lower().replace("_", "-")
    for item in sbom.get(kind, []):
        if item["name"].lower().replace("_", "-") == wanted:
            return item["version"]
    return None


# The distributions that carry each framework (the CPU and GPU wheels have their own names),
# keyed by its import name, as each declares them (runner/frameworks/<name>/).
FRAMEWORK_DISTRIBUTIONS = {framework.module: framework.distributions for framework in FRAMEWORKS.values()}


def framework_versions(sbom: dict) -> dict[str, str]:
    """{framework: version} for every deep-learning framework the image carries."""
    found = {}
    for framework, names in FRAMEWORK_DISTRIBUTIONS.items():
        version = next((v for v in (version_of(sbom, n) for n in names) if v), None)
        if version:
            found[framework] = version
    return found
