"""The records ``runner reproduce`` and ``runner reinfer`` print at the end, readable at 80
columns: the runs (short run ids; the full ids are in the folders and ``runner ls --json``),
the inference backends and, apart, LoadGen's figures, then one line per note (a gate that
failed, the claim, the evidence of training, why a run is not conforming)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from runner.inference.loadgen import claims_mlperf_minimums
from runner.results.inference import BackendRun
from runner.results.layout import short_id
from runner.results.record import Result
from runner.terminal import EMPTY, MISSING, Column, compact_table, fmt, markup, yes_no


def loadgen_cells(run: BackendRun) -> tuple[str, str, str]:
    """LoadGen SingleStream p50/p90 (ms) and Offline samples/s, '--' where it did not run."""
    lg = run.loadgen or {}
    single = lg.get("single_stream") or {}
    offline = lg.get("offline") or {}
    return (fmt(single.get("p50_ms"), ".3f"), fmt(single.get("p90_ms"), ".3f"),
            fmt(offline.get("samples_per_s"), ".0f"))


def loadgen_problems(run: BackendRun) -> list[str]:
    lg = run.loadgen or {}
    if lg.get("error"):
        return [lg["error"]]
    return [f"{scenario}: {(lg.get(scenario) or {}).get('problem')}" for scenario in ("single_stream", "offline")
            if (lg.get(scenario) or {}).get("problem")]


def loadgen_settings_line(run: BackendRun) -> str | None:
    """The LoadGen settings a backend ran with, in one line (None when LoadGen did not run)."""
    settings = (run.loadgen or {}).get("settings")
    if not isinstance(settings, dict):
        return None

    def seconds(ms):
        return f"{ms / 1000:g} s"

    def cap(ms):
        return f"at most {seconds(ms)}" if ms else "no maximum"

    mlperf = ("MLPerf's minimums" if claims_mlperf_minimums(run.loadgen)
              else "below MLPerf's minimums (--loadgen-mlperf restores them)")
    return (f"{settings.get('profile', 'dawnbench (before profiles)')}: SingleStream at least "
            f"{settings.get('single_stream_min_query_count')} queries and "
            f"{seconds(settings.get('single_stream_min_duration_ms'))}, "
            f"{cap(settings.get('single_stream_max_duration_ms'))}; Offline at least "
            + (f"{samples} samples and " if (samples := settings.get("offline_min_query_count", 1)) > 1 else "")
            + f"{seconds(settings.get('offline_min_duration_ms'))}, "
            f"{cap(settings.get('offline_max_duration_ms'))}; {mlperf}")


def energy_cell(energy: dict | None) -> str:
    """Joules-to-accuracy, or "not measured" (the reasons are in result.json's energy)."""
    training = (energy or {}).get("training") or {}
    value = training.get("joules_to_accuracy")
    if isinstance(value, (int, float)):
        return f"{value:.1f}"
    return "not measured" if not ((training.get("window") or {}).get("measured")) else MISSING


def claim_line(folder, result: Result, claimed: dict, tta: float) -> str:
    """The measurement beside the claim, compared only on a host of the claim's profile
    (``runner.claims.result_claim``: the rule the leaderboard and compare use too)."""
    from runner.claims import Comparison, result_claim  # lazy: start-up (profiles are read only for a claim)

    applies = result_claim(folder) or Comparison((result.hardware or {}).get("profile") or "", False,
                                                 ("the run has no fingerprint",), claimed.get("tta_seconds"))
    return applies.line(None, tta, short_id(result.run_id)) + resolution(result.training)


def evidence_line(r: Result) -> str | None:
    """The work to the crossing against one forward pass over the training set (class 4f)."""
    e = r.training.evidence if r.training else None
    if not isinstance(e, dict) or e.get("ratio") is None:
        return None
    return (f"evidence of training {short_id(r.run_id)}: {e['cpu_seconds']:.2f} CPU-s to the crossing, "
            f"{e['ratio']:.2f}x one forward pass over {e['train_items']} training items "
            f"({e['forward_pass_cpu_seconds']:.2f} CPU-s; floor {e['fraction']:g}x)")


def descent_line(r: Result) -> str | None:
    """How far the crossing model stayed from the runner's initial weights (class 4i)."""
    origin = r.training.model_origin if r.training else None
    models = ((origin or {}).get("descent") or {}).get("models") if isinstance(origin, dict) else None
    crossing = (models or {}).get("crossing") if isinstance(models, dict) else None
    if not isinstance(crossing, dict) or crossing.get("overall") is None:
        return None
    judged = [t["cosine"] for t in crossing.get("tensors") or [] if t.get("judged") and t.get("cosine") is not None]
    least = f", least judged tensor {min(judged):.2f}" if judged else ""
    return (f"descent from the runner's start {short_id(r.run_id)}: the crossing keeps cosine {crossing['overall']:.2f} "
            f"with its initial weights{least} (limit {crossing['limit']:g})")


def resolution(training) -> str:
    """Beside the TTA: the step the entry's evaluations time it in (runner.score.tta)."""
    step = training.tta_resolution_seconds if training and training.reached else None
    return "" if step is None else f" (resolution {step:.1f} s)"


def runs_table(results: list[Result]):
    """One row per run; its energy to accuracy, where measured, is a line below (``energy_line``)."""
    columns = [Column("run"), Column("status"), Column("reached"), Column("TTA s", number=True, keep_empty=True),
               Column("resolution s", number=True), Column("cost $", number=True), Column("conforming")]
    rows = []
    for r in results:
        t = r.training
        step = t.tta_resolution_seconds if t and t.reached else None
        rows.append([short_id(r.run_id), r.status, yes_no(bool(t and t.reached)), fmt(t.tta_seconds if t else None, ".2f"),
                     fmt(step, ".1f"), fmt(r.cost.training_usd if r.cost else None, ".6f"), yes_no(r.conforming)])
    return compact_table("runs", columns, rows)


def energy_line(r: Result) -> str | None:
    """Joules to accuracy where they were measured (why not is in result.json's energy)."""
    cell = energy_cell(r.energy)
    return None if cell in EMPTY else f"energy {short_id(r.run_id)}: {cell} J to accuracy (frozen time excluded)"


def inference_tables(metric: str, inference: dict[str, BackendRun]) -> list:
    """The per-item pass (batch 1, every evaluation item) and, apart, LoadGen's scenarios."""
    columns = [Column("backend"), Column("gate"), Column(f"{metric} %", number=True), Column("mean ms", number=True),
               Column("p50", number=True), Column("p90", number=True), Column("p99", number=True),
               Column("$ / 10k", number=True), Column("J / 10k", number=True)]
    rows = []
    for name, b in inference.items():
        lat = b.latency_ms or {}
        score = b.score(metric)
        rows.append([name, "pass" if b.passed_gate else "fail", fmt(score * 100 if score is not None else None, ".2f"),
                     *(fmt(lat.get(k), ".3f") for k in ("mean", "p50", "p90", "p99")),
                     fmt(b.cost_per_10k_usd, ".6f"), fmt(b.joules_per_10k, ".1f")])
    tables = [compact_table("inference (batch 1, every evaluation item)", columns, rows)]
    loadgen = [[name, *loadgen_cells(b)] for name, b in inference.items()]
    if any(cell != MISSING for row in loadgen for cell in row[1:]):
        tables.append(compact_table("MLPerf LoadGen", [
            Column("backend"), Column("SingleStream p50 ms", number=True), Column("p90 ms", number=True),
            Column("Offline samples/s", number=True)], loadgen))
    return tables


def print_inference(console: Console, metric: str, inference: dict[str, BackendRun]) -> None:
    """The backends' tables, then why a gate failed, LoadGen's problems and its settings."""
    for table in inference_tables(metric, inference):
        console.print(table)
    for name, b in inference.items():
        if not b.passed_gate:
            console.print(f"[yellow]no latency claim[/] for {markup(name)}: {markup(str(b.gate_reason))}")
        for problem in loadgen_problems(b):
            console.print(f"[yellow]LoadGen[/] {markup(name)}: {markup(problem)}")
    shown = {line for b in inference.values() if (line := loadgen_settings_line(b))}
    for line in sorted(shown):
        console.print(f"LoadGen settings {markup(line)}")


def print_results(console: Console, folders: list[Path]) -> None:
    results = [Result.read(folder) for folder in folders]
    console.print(runs_table(results))
    last = results[-1]
    if last.inference:
        print_inference(console, last.task.metric, last.inference)
    claimed = last.entry.claimed or {}
    for folder, r in zip(folders, results):
        tta = r.training.tta_seconds if r.training else None
        if claimed.get("tta_seconds") and tta is not None and not r.smoke:
            console.print(claim_line(folder, r, claimed, tta), highlight=False)
        for line in (energy_line(r), evidence_line(r), descent_line(r)):
            if line:
                console.print(line, highlight=False)
        if not r.conforming:
            console.print(f"[yellow]non-conforming[/] {short_id(r.run_id)}: "
                          + markup("; ".join(r.nonconforming_reasons)))
        if r.incomplete_reason:
            console.print(f"[red]{r.status}[/] {short_id(r.run_id)}: {markup(r.incomplete_reason)}")
