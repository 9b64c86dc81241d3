"""``runner study``'s arguments: the options every study shares, and one subcommand per row of
``runner.study.registry.STUDIES`` with the options its row declares."""

from __future__ import annotations

from runner.cli import argtypes
from runner.cli.arguments import slurm
from runner.study.registry import STUDIES

DESCRIPTION = ("Run an entry for a study of the metric and write results/<entry>/studies/<kind>-<stamp>/ "
               "with its signed runs, summary.json, PNG plots and report.html.")


def _common(p, runs_default: int | None = None) -> None:
    p.add_argument("entry", help="entry folder, e.g. entries/mnist-cnn-cpu")
    p.add_argument("--smoke", action="store_true", help="short runs on synthetic data (never conforming)")
    p.add_argument("--allow-hardware-mismatch", action="store_true",
                   help="run on a host that does not match the profile (runs are non-conforming)")
    p.add_argument("--backend", action="append", metavar="B", type=argtypes.backend,
                   help="inference backend (repeatable)")
    p.add_argument("--timeout-minutes", type=float, help="training timeout per run (default: manifest)")
    p.add_argument("--no-loadgen", action="store_true", help="skip LoadGen's runs in each run's inference phase")
    slurm.add_arguments(p)  # the study's runs as Slurm job arrays (docs/cluster.md)
    if runs_default is not None:
        p.add_argument("--runs", type=int, default=runs_default, help=f"runs to make (default {runs_default})")


def register(p) -> None:
    kinds = p.add_subparsers(dest="kind", metavar="KIND", required=True)
    for study in STUDIES.values():  # one subcommand per row of the registry
        s = kinds.add_parser(study.name, help=study.help, description=study.description)
        _common(s, runs_default=study.runs)
        for arg in study.arguments:
            keywords = dict(arg.keywords)
            if isinstance(keywords.get("type"), str):  # a function of runner.cli.argtypes, by name
                keywords["type"] = getattr(argtypes, keywords["type"])
            s.add_argument(*arg.flags, **keywords)
