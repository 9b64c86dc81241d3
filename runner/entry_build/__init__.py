"""Entry images: hash-pinned lock -> verified wheelhouse -> ``--network none`` build -> SBOM."""

from runner.entry_build.entry_image import BuiltImage, build_entry, image_tag
from runner.entry_build.lockfile import Pin, parse_lock
from runner.entry_build.sbom import framework_versions, read_sbom, version_of
from runner.entry_build.wheelhouse import resolve as resolve_wheels

__all__ = ["BuiltImage", "Pin", "build_entry", "image_tag", "parse_lock", "read_sbom",
           "resolve_wheels", "version_of", "framework_versions"]
