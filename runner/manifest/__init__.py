"""The entry manifest (``entry.yaml``): its JSON Schema and the typed view of it.

The names below load on first use (PEP 562), so that a reader of one small module of this
package (``runner.manifest.untrusted_yaml``, which `runner ls` reaches through the bundle
reader) does not pay for the schema validator and the frameworks' backends."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runner.lazy import exports

_WHERE = {"Entry": "runner.manifest.entry", "load_entry": "runner.manifest.entry",
          "ENTRY_SCHEMA": "runner.manifest.schema", "SCHEMA_VERSION": "runner.manifest.schema"}

__all__ = ["ENTRY_SCHEMA", "SCHEMA_VERSION", "Entry", "load_entry"]


# The same names as a type checker reads them (``X as X``: re-exported).
if TYPE_CHECKING:
    from runner.manifest.entry import Entry as Entry, load_entry as load_entry
    from runner.manifest.schema import ENTRY_SCHEMA as ENTRY_SCHEMA, SCHEMA_VERSION as SCHEMA_VERSION

__getattr__ = exports(__name__, _WHERE)
