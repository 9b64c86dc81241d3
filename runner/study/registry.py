"""The studies ``runner study NAME`` runs: the registry a new study plugs into.

Each row of ``STUDIES`` names a study and what it is made of: its own arguments (declared as
data here, so that ``runner study --help`` imports no study: ``runner.cli.arguments.study``
adds them after the options every study shares), the function that makes its new runs, the
one that reads runs already made (``--from-runs``, where it has one) and the one that renders
its summary as the tables, plots and notes of its report. Functions are named
``"module:function"`` and imported only when the study runs (``load``), so this module stays
light. ``runner.study.dispatch`` runs a request by its row and knows no study by name.

Adding a study is one module under ``runner/study`` (``KIND``; its run, its reader, its
report) and one row here (docs/studies.md, "Adding a study"); tests/test_study_registry.py
holds it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runner.tasks import TASKS


@dataclass(frozen=True)
class Argument:
    """One ``add_argument`` of a study's subcommand: its flags and keywords, except that
    ``type`` names a function of ``runner.cli.argtypes`` (resolved by the command line)."""

    flags: tuple[str, ...]
    keywords: tuple[tuple[str, Any], ...]

    @property
    def dest(self) -> str:
        """The attribute argparse stores it under (its first long flag's)."""
        return next(f for f in self.flags if f.startswith("--")).lstrip("-").replace("-", "_")


def argument(*flags: str, **keywords: Any) -> Argument:
    return Argument(flags, tuple(keywords.items()))


@dataclass(frozen=True)
class Study:
    """One row: ``runner study <name>``."""

    name: str
    help: str  # one line, in ``runner study --help``
    description: str  # ``runner study <name> --help``
    run: str  # "module:function": (StudyRequest) -> SavedStudy, making new runs
    report: str  # "module:function": (SavedStudy) -> StudyOutput, the report's tables, plots and notes
    arguments: tuple[Argument, ...] = ()  # its own options, after the shared ones, in --help's order
    runs: int | None = None  # --runs's default; None: no --runs
    from_runs: str | None = None  # "module:function": (StudyRequest, reader of the given runs) -> SavedStudy
    full_curve: bool = False  # each run evaluates its checkpoints past the crossing (the whole curve)


FROM_RUNS = argument("--from-runs", nargs="+", metavar="RUN", help="existing run folders instead of new runs")
NO_INFER = argument("--no-infer", action="store_true", help="skip the inference phase of each run")


def include_non_conforming(left_out: str) -> Argument:
    """``--include-non-conforming``: count non-conforming runs in ``left_out`` (the figures)."""
    return argument("--include-non-conforming", action="store_true",
                    help=f"count non-conforming runs in the {left_out} (by default they are named and left out)")


def _lesion(mode: str, what: str, description: str) -> Study:
    """The lesion study and the factor analysis: one module, the mode its row's name."""
    return Study(mode, what, description, "runner.study.lesion:new_runs", "runner.study.lesion:present", runs=3,
                 arguments=(argument("--switches", metavar="A,B",
                                     help="the declared switches to study (default: all, in order)"),
                            FROM_RUNS, NO_INFER, include_non_conforming("figures")),
                 from_runs="runner.study.lesion:given_runs")


STUDIES: dict[str, Study] = {s.name: s for s in (
    Study("stability", "N runs with the runner's seeds: TTA, median, CV, curves",
          "Run the entry N times with the runner's seeds (or read existing runs) and report each run's TTA, "
          "their median and coefficient of variation, and the curves.",
          "runner.study.stability:new_runs", "runner.study.stability:present", runs=5,
          arguments=(FROM_RUNS, NO_INFER, include_non_conforming("median and CV")),
          from_runs="runner.study.stability:given_runs", full_curve=True),
    Study("threshold", "TTA at a ladder of thresholds, from runs' curves",
          "Time-to-accuracy at each threshold of a ladder (the task's, or --thresholds), read from the runs' curves.",
          "runner.study.threshold:new_runs", "runner.study.threshold:present", runs=1,
          arguments=(FROM_RUNS, NO_INFER,
                     argument("--thresholds", help="percentages, comma-separated (default: the task's ladder)")),
          from_runs="runner.study.threshold:given_runs", full_curve=True),
    Study("batch-size", "one run per global batch size: epochs, throughput, TTA",
          "One run per global batch size: epochs to the threshold, throughput and TTA at each.",
          "runner.study.batch_size:new_runs", "runner.study.batch_size:present",
          arguments=(argument("--values", required=True, help="batch sizes, comma-separated, e.g. 32,128,512,2048"),
                     NO_INFER)),
    _lesion("lesion", "the full recipe and each declared switch off alone: TTA per variant",
            "Run the full recipe and the recipe with each switch its entry.yaml declares turned off alone "
            "(N runs each, seeds the runner draws): median TTA, spread, fraction reached and accuracy at the "
            "full recipe's TTA per variant."),
    _lesion("factors", "from every declared switch off, each added back in order: TTA per step",
            "The factor analysis: from the recipe with every declared switch off, add the switches back one "
            "at a time in the manifest's order, ending at the full recipe; the lesion's figures per step."),
    Study("scaling", "TTA and time per epoch against processes on one host and Slurm nodes",
          "TTA and time per epoch at 1, 2, 4 ... processes on one host and, with --slurm, across Slurm nodes: "
          "speed-up and efficiency against one process, and the entry's communication time where it logs it.",
          "runner.study.scaling:new_runs", "runner.study.scaling:present", runs=1,
          arguments=(argument("--processes", default="1,2",
                              help="processes on one host, comma-separated (default 1,2)"),
                     argument("--nodes", help="Slurm nodes with one process each, comma-separated, e.g. 1,2 "
                                              "(needs --slurm)"),
                     FROM_RUNS, NO_INFER),
          from_runs="runner.study.scaling:given_runs"),
    Study("roofline", "achieved FLOP/s in training and inference against the peak",
          "The FLOP/s a run achieved in training and in inference, against the hardware's peak.",
          "runner.study.roofline:new_runs", "runner.study.roofline:present",
          arguments=(argument("--from-runs", nargs="+", metavar="RUN",
                              help="an existing run folder instead of a new run"),
                     argument("--batch-size", type=int, help="the run's global batch size (default: the manifest's)")),
          from_runs="runner.study.roofline:given_runs"),
    Study("generalization",
          "final models on a second test set (the gap, with its interval) and a linear head on their features "
          "for another task",
          "Score each run's final model on the task's second test set (QMNIST, CIFAR-10.1, ImageNetV2) with the "
          "runner's evaluator, the gap with its interval, and a linear head on the model's penultimate features "
          "for another task against the same head on a randomly initialised copy.",
          "runner.study.generalization:new_runs", "runner.study.generalization:present", runs=1,
          arguments=(
              FROM_RUNS, NO_INFER,
              argument("--extra-set", metavar="NAME", help="the second test set (default: the task's first; "
                       "`runner data import NAME` stages it)"),
              argument("--reference", action="append", metavar="NAME=ORIG,NEW|RUN",
                       help="a reference model: its accuracies in percent on the original and the new set, or a "
                            "run folder (of any entry of the task) whose final model is evaluated the same way; "
                            "repeatable"),
              argument("--transfer-task", choices=sorted(TASKS), metavar="TASK",
                       help="the task the linear head is trained for (default: the task's declared one, else a "
                            "staged task of the same input shape)"),
              # default: runner.study.generalization.TRANSFER_TRAIN_ITEMS (not imported here: numpy, for --help)
              argument("--transfer-items", type="item_count",
                       help="training items of that task the head is fitted on (default 10,000)"),
              argument("--no-transfer", action="store_true", help="skip the transfer measure")),
          from_runs="runner.study.generalization:given_runs"),
)}


def load(reference: str) -> Callable[..., Any]:
    """The function a row names as ``"module:function"`` (importing its module now)."""
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)
