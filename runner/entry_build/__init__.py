"""Entry images: hash-pinned lock -> verified wheelhouse -> ``--network none`` build -> SBOM.

The names below are loaded when first used (PEP 562), so that running one of the package's
modules (``python -m runner.entry_build.information``) does not import it twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runner.lazy import exports

_EXPORTS: dict[str, str | tuple[str, str]] = {
    **dict.fromkeys(("BuiltImage", "build_entry", "image_tag"), "runner.entry_build.entry_image"),
    **dict.fromkeys(("Pin", "parse_lock"), "runner.entry_build.lockfile"),
    **dict.fromkeys(("framework_versions", "read_sbom", "version_of"), "runner.entry_build.sbom"),
    "resolve_wheels": ("runner.entry_build.wheelhouse", "resolve"),
}

__all__ = ["BuiltImage", "Pin", "build_entry", "image_tag", "parse_lock", "read_sbom",
           "resolve_wheels", "version_of", "framework_versions"]


# The same names as a type checker reads them (``X as X``: re-exported).
if TYPE_CHECKING:
    from runner.entry_build.entry_image import (
        build_entry as build_entry, BuiltImage as BuiltImage, image_tag as image_tag,
    )
    from runner.entry_build.lockfile import parse_lock as parse_lock, Pin as Pin
    from runner.entry_build.sbom import (
        framework_versions as framework_versions, read_sbom as read_sbom, version_of as version_of,
    )
    from runner.entry_build.wheelhouse import resolve as resolve_wheels

__getattr__ = exports(__name__, _EXPORTS)
