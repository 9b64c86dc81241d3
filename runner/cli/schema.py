"""``runner schema``: print the JSON Schema of entry.yaml (or check a manifest against it)."""

from __future__ import annotations

import json

from runner.manifest import ENTRY_SCHEMA, load_entry
from runner.results import RESULT_SCHEMA


def run(args) -> int:
    if args.check:
        entry = load_entry(args.check)
        print(f"{entry.manifest_path}: valid (schema version {entry.raw['schema_version']})")
        return 0
    print(json.dumps(RESULT_SCHEMA if args.result else ENTRY_SCHEMA, indent=2))
    return 0
