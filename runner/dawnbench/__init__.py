"""DAWNBench's submission format (stanford-futuredata/dawn-bench-entries): read published
submissions into claims, and write a reproduced result as a submission.

The names below load on first use (PEP 562): `runner show` reads one small module of this
package (``tasks``, ``tsv``) without loading the exporter and the bundle writer behind it."""

from __future__ import annotations

import importlib

_WHERE = {
    **dict.fromkeys(("Claim", "CurvePoint", "load_claims", "save_claim"), "runner.dawnbench.claims"),
    "export_dawnbench": "runner.dawnbench.exporter",
    **dict.fromkeys(("ImportReport", "import_dawnbench"), "runner.dawnbench.importer"),
    "FormatError": "runner.dawnbench.tsv",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'runner.dawnbench' has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value
    return value
