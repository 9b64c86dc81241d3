"""DAWNBench's submission format (stanford-futuredata/dawn-bench-entries): read published
submissions into claims, and write a reproduced result as a submission."""

from runner.dawnbench.claims import Claim, CurvePoint, load_claims, save_claim
from runner.dawnbench.exporter import export_dawnbench
from runner.dawnbench.importer import ImportReport, import_dawnbench
from runner.dawnbench.tsv import FormatError

__all__ = [
    "Claim", "CurvePoint", "FormatError", "ImportReport", "export_dawnbench", "import_dawnbench",
    "load_claims", "save_claim",
]
