"""``runner reinfer ENTRY``: re-run only the inference phase on a result's trained model.

The command parses its flags, calls ``runner.reinference.reinfer`` (which finds and checks
the result, runs the harness and swaps the new inference in only on success) and renders
the backends' table.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from runner.cli.records import print_inference
from runner.manifest.schema import BACKENDS
from runner.reinference import reinfer
from runner.report import Reporter, reporting


def register(subparsers) -> None:
    # "reinfer": the inference phase again, on a result that exists (``runner.reinference``);
    # "infer", its earlier name, still works.
    p = subparsers.add_parser(
        "reinfer", aliases=["infer"],
        help="re-run only the inference phase (batch-1 latency) on a result's trained model",
        description="Time each backend on every evaluation item, one at a time, inside the "
        "entry's image, using the final model of an existing result (the latest by default), "
        "and rewrite that result's inference section.",
    )
    p.add_argument("entry", help="entry folder, e.g. entries/mnist-cnn-cpu")
    p.add_argument("--backend", action="append", dest="backends", choices=BACKENDS,
                   help="backend to time (repeatable; default: the manifest's inference.backends)")
    p.add_argument("--result", type=Path, help="result folder (default: the entry's latest result)")
    p.add_argument("--threads", type=int, help="intra-op threads (default: the manifest's inference.threads)")
    p.add_argument("--json", action="store_true",
                   help="print the result folder and each backend's new record as JSON (progress to stderr)")
    p.set_defaults(func=run)


def run(args) -> int:
    console = Console()
    if args.json:  # stdout is the JSON's alone: the progress goes to stderr
        with reporting(Reporter(Console(stderr=True))):
            outcome = reinfer(args.entry, result_dir=args.result, backends=args.backends, threads=args.threads)
        print(json.dumps({"result": str(outcome.result_dir), "replaced": outcome.replaced, "kept": outcome.kept,
                          "inference": {name: rec.to_dict() for name, rec in outcome.inference.items()}},
                         indent=2))
        return 0 if outcome.passed else 1
    outcome = reinfer(args.entry, result_dir=args.result, backends=args.backends, threads=args.threads,
                      on_timed=lambda metric, inference: print_inference(console, metric, inference))
    return 0 if outcome.passed else 1
