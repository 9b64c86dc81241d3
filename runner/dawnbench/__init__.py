"""DAWNBench's submission format (stanford-futuredata/dawn-bench-entries): read published
submissions into claims, and write a reproduced result as a submission.

The names below load on first use (PEP 562): `runner show` reads one small module of this
package (``tasks``, ``tsv``) without loading the exporter and the bundle writer behind it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runner.lazy import exports

_WHERE = {
    **dict.fromkeys(("Claim", "CurvePoint", "load_claims", "save_claim"), "runner.dawnbench.claims"),
    "export_dawnbench": "runner.dawnbench.exporter",
    **dict.fromkeys(("ImportReport", "import_dawnbench"), "runner.dawnbench.importer"),
    "FormatError": "runner.dawnbench.tsv",
}

__all__ = sorted(_WHERE)


# The same names as a type checker reads them (``X as X``: re-exported).
if TYPE_CHECKING:
    from runner.dawnbench.claims import (
        Claim as Claim, CurvePoint as CurvePoint, load_claims as load_claims, save_claim as save_claim,
    )
    from runner.dawnbench.exporter import export_dawnbench as export_dawnbench
    from runner.dawnbench.importer import import_dawnbench as import_dawnbench, ImportReport as ImportReport
    from runner.dawnbench.tsv import FormatError as FormatError

__getattr__ = exports(__name__, _WHERE)
