"""The image's SBOM in the field's format: CycloneDX 1.6 JSON (``sbom.cdx.json``), written
beside the runner's own ``sbom.json`` for the scanners auditors use (grype, trivy,
Dependency-Track).

It is derived, never typed: a pure function of ``sbom.json`` (the packages read from the image
itself), the entry's hash-pinned lock (each Python package's sha256, where the lock pins that
version) and the image's record in ``result.json``. ``runner verify`` rebuilds it from the
bundle's own files and requires equality (``runner.verify.sbom``). No time stamp, and a serial
number drawn from the content (a name-based UUID), so the same image always gives the same bytes.

Components: every Python distribution (``pkg:pypi/<name>@<version>``, the name normalised as
the purl specification asks) and every Debian package (``pkg:deb/debian/<name>@<version>``)
the image holds; the base image, by the content digests ``sbom.json`` records, as a
``container`` component; the entry's image itself is the document's subject.
"""

from __future__ import annotations

import json
import uuid
from urllib.parse import quote

from runner.entry_build.lockfile import Pin, normalise_name

FILE = "sbom.cdx.json"
SPEC_VERSION = "1.6"
SCHEMA = "http://cyclonedx.org/schema/bom-1.6.schema.json"
# A name-based UUID needs a namespace of its own: this one, drawn once, never changes.
SERIAL_NAMESPACE = uuid.UUID("6f1d7a52-3c1e-4f4e-9a51-0c6f3b0d2e7a")


def _quoted(text: str) -> str:
    """A purl name or version: percent-encoded as the purl specification (and packageurl-python)
    encodes it, ``:`` kept (a Debian epoch, ``1:2.38.1-5``)."""
    return quote(text, safe=":")


def pypi_purl(name: str, version: str) -> str:
    """``pkg:pypi/<name>@<version>``: the name lower case with ``_`` as ``-`` (the purl pypi rule)."""
    return f"pkg:pypi/{_quoted(name.lower().replace('_', '-'))}@{_quoted(version)}"


def deb_purl(name: str, version: str) -> str:
    return f"pkg:deb/debian/{_quoted(name)}@{_quoted(version)}"


def _lock_hashes(pins: list[Pin]) -> dict[tuple[str, str], list[str]]:
    """``{(normalised name, version): [sha256, ...]}``: every hash the lock allows for that pin."""
    out: dict[tuple[str, str], list[str]] = {}
    for pin in pins:
        hashes = out.setdefault((pin.key, pin.version), [])
        hashes += [h for h in pin.hashes if h not in hashes]
    return out


def _python_component(item: dict, hashes: dict[tuple[str, str], list[str]]) -> dict:
    name, version = str(item["name"]), str(item["version"])
    component: dict[str, object] = {"type": "library", "bom-ref": pypi_purl(name, version), "name": name, "version": version,
                 "purl": pypi_purl(name, version)}
    locked = hashes.get((normalise_name(name), version))
    if locked:
        component["hashes"] = [{"alg": "SHA-256", "content": h} for h in sorted(locked)]
    return component


def _debian_component(item: dict) -> dict:
    name, version = str(item["name"]), str(item["version"])
    purl = deb_purl(name, version)
    return {"type": "library", "bom-ref": purl, "name": name, "version": version, "purl": purl}


def _base_component(base: dict) -> dict:
    """The base image by what it holds: its layers' diff ids and a digest over every file."""
    properties = [{"name": f"runner:base:layer:{i}", "value": str(layer)}
                  for i, layer in enumerate(base.get("layers") or [])]
    for key in ("files", "files_sha256", "debian_release", "tool"):
        if base.get(key) is not None:
            properties.append({"name": f"runner:base:{key}", "value": str(base[key])})
    return {"type": "container", "bom-ref": "base-image", "name": str(base.get("tag") or "base image"),
            "properties": properties}


def _unique(components: list[dict]) -> list[dict]:
    """One component per bom-ref (the schema requires unique refs); the first kept."""
    seen: set[str] = set()
    out = []
    for component in components:
        if component["bom-ref"] not in seen:
            seen.add(component["bom-ref"])
            out.append(component)
    return out


def cyclonedx_document(sbom: dict, pins: list[Pin] | None, image_id: str | None, image_tag: str | None,
                       toolkit_version: str) -> dict:
    """The CycloneDX 1.6 document of an image: ``sbom`` is ``sbom.json``'s content, ``pins`` the
    entry's lock (None when it is not at hand: no hashes then)."""
    hashes = _lock_hashes(pins or [])
    components = [_python_component(item, hashes) for item in sbom.get("python") or []]
    components += [_debian_component(item) for item in sbom.get("debian") or []]
    components = _unique(components)
    if isinstance(sbom.get("base"), dict):
        components.append(_base_component(sbom["base"]))
    image = {"type": "container", "bom-ref": "image", "name": str(image_tag or "entry image")}
    if image_id:
        image["version"] = str(image_id)
    document = {
        "$schema": SCHEMA,
        "bomFormat": "CycloneDX",
        "specVersion": SPEC_VERSION,
        "version": 1,
        "metadata": {
            "tools": {"components": [{"type": "application", "name": "runner", "version": str(toolkit_version)}]},
            "component": image,
        },
        "components": components,
        "dependencies": [{"ref": "image", "dependsOn": [c["bom-ref"] for c in components]}],
    }
    content = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return {"serialNumber": f"urn:uuid:{uuid.uuid5(SERIAL_NAMESPACE, content)}", **document}
