"""Entry images: hash-pinned lock -> verified wheelhouse -> ``--network none`` build -> SBOM.

The names below are loaded when first used (PEP 562), so that running one of the package's
modules (``python -m runner.entry_build.information``) does not import it twice.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "BuiltImage": "entry_image", "build_entry": "entry_image", "image_tag": "entry_image",
    "Pin": "lockfile", "parse_lock": "lockfile",
    "framework_versions": "sbom", "read_sbom": "sbom", "version_of": "sbom",
    "resolve_wheels": ("wheelhouse", "resolve"),
}

__all__ = ["BuiltImage", "Pin", "build_entry", "image_tag", "parse_lock", "read_sbom",
           "resolve_wheels", "version_of", "framework_versions"]


def __getattr__(name: str):
    where = _EXPORTS.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = where if isinstance(where, tuple) else (where, name)
    value = getattr(importlib.import_module(f"{__name__}.{module}"), attribute)
    globals()[name] = value
    return value
