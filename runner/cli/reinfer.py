"""``runner reinfer ENTRY``: re-run only the inference phase on a result's trained model.

The command parses its flags, calls ``runner.reinference.reinfer`` (which finds and checks
the result, runs the harness and swaps the new inference in only on success) and renders
the backends' table.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from runner.cli.reproduce import loadgen_cells
from runner.reinference import reinfer
from runner.results.inference import BackendRun


def print_inference(console: Console, metric: str, inference: dict[str, BackendRun]) -> None:
    table = Table(title="inference (batch 1, every evaluation item)")
    for col in ("backend", "gate", metric, "mean ms", "p50", "p90", "p99", "max", "items/s", "$ / 10k",
                "LoadGen p50", "LoadGen p90", "LoadGen offline /s"):
        table.add_column(col)

    def fmt(value, spec):
        return "--" if value is None else format(value, spec)

    for name, rec in inference.items():
        lat = rec.latency_ms or {}
        score = rec.score(metric)
        table.add_row(
            name,
            "[green]pass[/]" if rec.passed_gate else f"[red]fail[/]: {rec.gate_reason}",
            fmt(None if score is None else score * 100, ".2f"),
            *(fmt(lat.get(k), ".4f") for k in ("mean", "p50", "p90", "p99", "max")),
            fmt(rec.throughput_per_s, ".0f"), fmt(rec.cost_per_10k_usd, ".3g"),
            *loadgen_cells(rec),
        )
    console.print(table)


def run(args) -> int:
    console = Console()
    outcome = reinfer(args.entry, result_dir=args.result, backends=args.backends, threads=args.threads,
                      on_timed=lambda metric, inference: print_inference(console, metric, inference))
    return 0 if outcome.passed else 1
