"""The entry manifest (``entry.yaml``): its JSON Schema and the typed view of it.

The names below load on first use (PEP 562), so that a reader of one small module of this
package (``runner.manifest.untrusted_yaml``, which `runner ls` reaches through the bundle
reader) does not pay for the schema validator and the frameworks' backends."""

from __future__ import annotations

import importlib

_WHERE = {"Entry": "runner.manifest.entry", "load_entry": "runner.manifest.entry",
          "ENTRY_SCHEMA": "runner.manifest.schema", "SCHEMA_VERSION": "runner.manifest.schema"}

__all__ = ["ENTRY_SCHEMA", "SCHEMA_VERSION", "Entry", "load_entry"]


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'runner.manifest' has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value
    return value
