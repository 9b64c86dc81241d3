"""The entry manifest (``entry.yaml``): its JSON Schema and the typed view of it."""

from runner.manifest.entry import Entry, load_entry
from runner.manifest.schema import ENTRY_SCHEMA, SCHEMA_VERSION

__all__ = ["ENTRY_SCHEMA", "SCHEMA_VERSION", "Entry", "load_entry"]
