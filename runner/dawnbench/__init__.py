"""DAWNBench's submission format (stanford-futuredata/dawn-bench-entries): read published
submissions into claims, and write a reproduced result as a submission.

The names below load on first use (PEP 562): `runner show` reads one small module of this
package (``tasks``, ``tsv``) without loading the exporter and the bundle writer behind it."""

from __future__ import annotations

from runner.lazy import exports

_WHERE = {
    **dict.fromkeys(("Claim", "CurvePoint", "load_claims", "save_claim"), "runner.dawnbench.claims"),
    "export_dawnbench": "runner.dawnbench.exporter",
    **dict.fromkeys(("ImportReport", "import_dawnbench"), "runner.dawnbench.importer"),
    "FormatError": "runner.dawnbench.tsv",
}

__all__ = sorted(_WHERE)


__getattr__ = exports(__name__, _WHERE)
