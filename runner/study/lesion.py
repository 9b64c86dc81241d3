"""Which optimizations matter: DAWNBench's lesion study and factor analysis.

The entry declares its recipe's optimizations as switches (``entry.yaml``'s ``switches``,
``runner.manifest.switches``). The **lesion** study runs the full recipe and the recipe with
each switch off alone; the **factor analysis** starts from the recipe with every switch off
and adds them back one at a time, in the manifest's order, ending at the full recipe. Each
variant is N signed runs made by ``runner reproduce``'s own path with seeds the runner
draws, marked in their result.json as a study variant (``variant``), so the leaderboard
and the claims leave them out.

Per variant: the median TTA and its spread (the fastest and slowest run that reached), the
fraction of runs that reached the threshold, and, for runs that never reached it, their
accuracy at the full recipe's median TTA, read from their curve (the last runner
evaluation at or before that training time). A switch that has no effect on the host (its
``host_cpu_flags``: bf16 autocast on a CPU without bf16 units) is not run on this host and
is reported as such; on other hosts (``--slurm``, ``--from-runs``) its runs are made or
read and the report says the same from their fingerprints.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from runner.errors import UserError
from runner.fingerprint.cpu import capture_cpu
from runner.manifest import Entry, load_entry
from runner.manifest.switches import Switch, chosen
from runner.report import reporter
from runner.safe_read import read_json_object
from runner.study.readable import read_run
from runner.study.common import (
    SavedStudy, StudyOutput, Table, fmt, left_out, read_curve, run_entry, save_study, with_runs,
)
from runner.study.plots import figure, save

if TYPE_CHECKING:
    from collections.abc import Callable

    from runner.study.dispatch import StudyRequest

MODES = ("lesion", "factors")
KIND_COLOURS = {"software": "#4c78a8", "hardware": "#f58518", "statistical": "#54a24b", None: "#9d9d9d"}


@dataclass(frozen=True)
class Variant:
    """One bar: the recipe with ``off`` switched off."""

    label: str
    off: tuple[str, ...]  # switch names, the manifest's order
    changed: Switch | None = None  # lesion: the switch turned off; factors: the switch added back


def variants(mode: str, switches: list[Switch]) -> list[Variant]:
    """Lesion: the full recipe, then each switch off alone. Factors: every switch off, then
    each added back in order (the last step is the full recipe)."""
    names = tuple(s.name for s in switches)
    if mode == "lesion":
        return [Variant("full recipe", ())] + [Variant(f"without {s.name}", (s.name,), s) for s in switches]
    if mode != "factors":
        raise ValueError(f"unknown mode {mode!r}; the modes are {', '.join(MODES)}")
    steps = [Variant("every switch off", names)]
    for i, s in enumerate(switches):
        steps.append(Variant(f"+ {s.name}" + (" (full recipe)" if i == len(switches) - 1 else ""), names[i + 1:], s))
    return steps


def reference(mode: str, plan: list[Variant]) -> Variant:
    """The full recipe: the lesion's first bar, the factor analysis' last."""
    return plan[0] if mode == "lesion" else plan[-1]


def host_cpu_flags() -> list[str]:
    return capture_cpu()["flags"]


def _run_flags(folder: Path) -> list[str] | None:
    """The CPU flags of the host a run trained on (its fingerprint.json), None if unreadable."""
    try:
        flags = read_json_object(Path(folder) / "fingerprint.json", "json")["cpu"]["flags"]
    except (UserError, KeyError, TypeError):
        return None
    return [str(f) for f in flags] if isinstance(flags, list) else None


def no_effect_on_runs(variant: Variant, folders: list[Path]) -> str | None:
    """Why the variant is the recipe of the row before it on every host its runs had."""
    if variant.changed is None or not variant.changed.host_cpu_flags or not folders:
        return None
    where = "the runs' hosts"
    reasons = [variant.changed.no_effect_on(flags, where) if (flags := _run_flags(f)) is not None else None
               for f in folders]
    return reasons[0] if all(reasons) else None


def accuracy_at(folder: Path, seconds: float) -> float | None:
    """The run's score (percent) at ``seconds`` of training time: its last runner evaluation
    at or before then (None: none had been made)."""
    before = [p for p in read_curve(folder) if p[1] <= seconds + 1e-9]
    return before[-1][2] if before else None


def _spread(values: list[float]) -> dict:
    if not values:
        return {"median_tta_seconds": None, "min_tta_seconds": None, "max_tta_seconds": None,
                "coefficient_of_variation": None}
    cv = statistics.stdev(values) / statistics.mean(values) if len(values) > 1 else None
    return {"median_tta_seconds": statistics.median(values), "min_tta_seconds": min(values),
            "max_tta_seconds": max(values), "coefficient_of_variation": cv}


def analyse(mode: str, entry: Entry, switches: list[Switch], runs: dict[str, list[Path]],
            skipped: dict[str, str], include_nonconforming: bool = False, runs_per_variant: int | None = None) -> dict:
    """The summary: per variant its runs and figures. ``runs``: label -> run folders;
    ``skipped``: label -> why the variant was not run on this host."""
    plan = variants(mode, switches)
    every = [f for v in plan for f in runs.get(v.label, [])]
    results = {f: read_run(f) for f in every}
    dropped = left_out([results[f] for f in every], every, {})
    skip = set() if include_nonconforming else {d["run_id"] for d in dropped}
    counted = {f for f in every if results[f].run_id not in skip and results[f].status == "complete"}
    rows = []
    for v in plan:
        folders = runs.get(v.label, [])
        ttas = [tta for f in folders if f in counted and (tta := results[f].tta_seconds) is not None]
        n = sum(f in counted for f in folders)
        rows.append({
            "label": v.label, "switches_off": list(v.off),
            "changed": v.changed.name if v.changed else None, "kind": v.changed.kind if v.changed else None,
            "no_effect": skipped.get(v.label) or no_effect_on_runs(v, folders),
            "ran": v.label not in skipped,
            "runs": [{"run_id": results[f].run_id, "seed": results[f].seed, "status": results[f].status,
                      "reached": results[f].tta_seconds is not None, "tta_seconds": results[f].tta_seconds,
                      "conforming": results[f].conforming, "counted": f in counted,
                      "variant": results[f].variant} for f in folders],
            "counted_runs": n, "reached": len(ttas), "fraction_reached": len(ttas) / n if n else None,
            **_spread(ttas),
        })
    ref = reference(mode, plan)
    ref_tta = next(r for r in rows if r["label"] == ref.label)["median_tta_seconds"]
    for row, v in zip(rows, plan):
        row["ratio_to_full_recipe"] = (row["median_tta_seconds"] / ref_tta
                                       if ref_tta and row["median_tta_seconds"] is not None else None)
        # A counted run that never reached: where it stood when the full recipe had reached.
        at_ref = []
        for run, folder in zip(row["runs"], runs.get(v.label, [])):
            missed = folder in counted and not run["reached"] and ref_tta is not None
            run["accuracy_at_full_recipe_tta_percent"] = accuracy_at(folder, ref_tta) if missed else None
            if run["accuracy_at_full_recipe_tta_percent"] is not None:
                at_ref.append(run["accuracy_at_full_recipe_tta_percent"])
        row["accuracy_at_full_recipe_tta_percent"] = statistics.median(at_ref) if at_ref else None
    return {
        "kind": mode, "entry": entry.name, "task": entry.task.id, "threshold": entry.task.threshold,
        "runs_per_variant": runs_per_variant,
        "switches": [{"name": s.name, "kind": s.kind, "description": s.description, "disable": s.off_text(),
                      "host_cpu_flags": list(s.host_cpu_flags)} for s in switches],
        "full_recipe": {"label": ref.label, "median_tta_seconds": ref_tta},
        "variants": rows,
        "smoke": any(r.smoke for r in results.values()),
        "non_conforming": dropped, "non_conforming_included": include_nonconforming,
    }


def plot(summary: dict, path: Path) -> str:
    """Horizontal bars, one per variant in order: the median TTA, the fastest and slowest run
    that reached as the error bar, coloured by the switch's kind; the full recipe's TTA dashed."""
    rows = summary["variants"]
    fig, (ax,) = figure(width=7.5)
    top = max([r["max_tta_seconds"] or 0 for r in rows] + [summary["full_recipe"]["median_tta_seconds"] or 0, 1])
    ys = list(range(len(rows)))[::-1]
    for y, row in zip(ys, rows):
        colour = KIND_COLOURS.get(row["kind"], KIND_COLOURS[None])
        median = row["median_tta_seconds"]
        if median is not None:
            err = [[median - row["min_tta_seconds"]], [row["max_tta_seconds"] - median]]
            ax.barh(y, median, color=colour, xerr=err, capsize=3, ecolor="#333")
            ax.text(median, y, f"  {median:.1f} s ({row['reached']}/{row['counted_runs']})", va="center", fontsize=7)
        elif not row["ran"] or not row["counted_runs"]:
            ax.text(0, y, f"  {_missing(row)}", va="center", fontsize=7, color="#555")
        else:
            ax.barh(y, top * 1.1, color="none", edgecolor=colour, hatch="//")
            acc = row["accuracy_at_full_recipe_tta_percent"]
            ax.text(0, y, "  never reached" + (f": {acc:.2f}% at the full recipe's TTA" if acc is not None else ""),
                    va="center", fontsize=7)
    if summary["full_recipe"]["median_tta_seconds"] is not None:
        ax.axvline(summary["full_recipe"]["median_tta_seconds"], color="grey", ls="--", lw=1)
    ax.set_yticks(ys, [r["label"] for r in rows])
    ax.set_xlim(0, top * 1.35)
    ax.set_xlabel("time to accuracy (s): median, bars from the fastest to the slowest run")
    ax.set_title("lesion: each switch off alone" if summary["kind"] == "lesion"
                 else "factor analysis: switches added back in order")
    handles = [_kind_patch(c, k) for k, c in KIND_COLOURS.items() if k]
    ax.legend(handles=handles, fontsize=7, loc="lower right")
    return save(fig, path)


def _kind_patch(colour: str, label: str):
    from matplotlib.patches import Patch  # lazy: heavy (matplotlib, only when a plot is drawn)

    return Patch(color=colour, label=label)


def _missing(row: dict) -> str:
    """Why a variant has no figure: not run here, no run of it, or its runs left out."""
    if not row["ran"]:
        return "not run"  # why: a note below the table (the variant's no_effect)
    if not row["runs"]:
        return "no runs"
    return "none counted"  # the notes name the runs left out (non-conforming or incomplete)


def present(saved: SavedStudy) -> StudyOutput:
    """Its row's report: the saved study's summary as its tables, plots and notes."""
    folder, summary = saved.folder, saved.summary
    rows = []
    for r in summary["variants"]:
        tta = "never reached" if r["counted_runs"] and not r["reached"] else fmt(r["median_tta_seconds"], ".2f")
        spread = (f"{r['min_tta_seconds']:.2f}-{r['max_tta_seconds']:.2f}" if r["reached"] > 1 else "--")
        reached = "--" if r["fraction_reached"] is None else f"{r['reached']}/{r['counted_runs']}"
        acc = fmt(r["accuracy_at_full_recipe_tta_percent"], ".2f")
        if not r["ran"] or not r["counted_runs"]:
            tta = _missing(r)
        rows.append([r["label"], r["kind"] or "--", tta, spread, reached, fmt(r["ratio_to_full_recipe"], ".2f"), acc])
    name = plot(summary, folder / f"{summary['kind']}.png")
    notes = [f"{r['label']}: {r['no_effect']}" for r in summary["variants"] if r["no_effect"]]
    notes += [f"{s['name']} ({s['kind']}): {s['description'] or 'no description'}; off: {s['disable']}"
              for s in summary["switches"]]
    verb = "counted in, as asked" if summary["non_conforming_included"] else "left out of the figures"
    notes += [f"non-conforming {d['run_id']} ({verb}): {'; '.join(d['reasons'])}" for d in summary["non_conforming"]]
    notes.append("every run is a study variant (result.json variant): the leaderboard and the claims leave it out"
                 if summary["kind"] == "factors" else
                 "runs with a switch off are study variants (result.json variant): the leaderboard and the claims "
                 "leave them out")
    if summary.get("smoke"):
        notes.append("smoke runs: one short epoch on synthetic data; the figures check the pipeline, not the recipe")
    title = "lesion: the full recipe and each switch off alone" if summary["kind"] == "lesion" else \
        "factor analysis: from every switch off, each added back in the manifest's order"
    return StudyOutput(
        summary["kind"], summary["entry"], folder, summary, notes=notes,
        plots=[(name, "median TTA per variant (bars: fastest to slowest run that reached; dashed: the full recipe)")],
        # The variant's label names its switches (without X; + X); the notes say what each turns off.
        tables=[Table(title, ["variant", "kind", "median TTA s", "spread s", "reached", "x full",
                              "top1 % at full's TTA"], rows)],
    )


def _switches(entry: Entry, names: list[str] | None) -> list[Switch]:
    if not entry.switches:
        raise UserError(f"entry {entry.name} declares no switches",
                        "declare the recipe's optimizations in a switches: section of its entry.yaml "
                        "(name, kind, disable: {env: RUNNER_SWITCH_<NAME>}; docs/studies.md)")
    return chosen(entry.switches, names or [s.name for s in entry.switches], entry.name)


def parse_names(text: str | None) -> list[str] | None:
    """``--switches a,b``: the switches to study (None: every one the manifest declares)."""
    if not text:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names or len(set(names)) != len(names):
        raise UserError(f"--switches {text!r} is not a list of switch names",
                        "name each declared switch once, separated by commas, e.g. --switches bf16,one-cycle")
    return names


def run(mode: str, entry_path: str, runs: int, opts, names: list[str] | None = None, slurm=None,
        include_nonconforming: bool = False) -> SavedStudy:
    if runs < 1:
        raise UserError(f"--runs {runs} is not a number of runs", "give at least 1 (default 3)")
    entry = load_entry(entry_path)
    switches = _switches(entry, names)
    flags = None if slurm is not None else host_cpu_flags()  # a Slurm node's are read from its runs
    made, skipped = {}, {}
    for v in variants(mode, switches):
        if flags is not None and v.changed is not None and (why := v.changed.no_effect_on(flags)):
            skipped[v.label] = why
            reporter().print(f"[bold]{mode}[/] {v.label}: {why}; not run")
            continue
        reporter().print(f"[bold]{mode}[/] {v.label}: {runs} run(s), switches off: {', '.join(v.off) or 'none'}")
        chosen_opts = replace(with_runs(opts, runs, seed=None), switches_off=v.off)  # the runner draws the seeds
        made[v.label] = run_entry(entry_path, chosen_opts, slurm)
    return study(mode, entry, switches, made, skipped, include_nonconforming, runs)


def from_runs(mode: str, entry_path: str, folders: list[Path], names: list[str] | None = None,
              include_nonconforming: bool = False) -> SavedStudy:
    """The study of runs already made: each is placed by the switches its result.json says
    were off; runs of no variant of this study are named and left out."""
    entry = load_entry(entry_path)
    switches = _switches(entry, names)
    by_off = {frozenset(v.off): v.label for v in variants(mode, switches)}
    grouped: dict[str, list[Path]] = {}
    for folder in folders:
        result = read_run(folder)
        off = frozenset((result.variant or {}).get("switches_off") or ())
        if off not in by_off or {"nodes", "processes_per_node"} & set(result.variant or {}):
            raise UserError(f"{folder} is not a run of any variant of this {mode} study "
                            f"(switches off: {', '.join(sorted(off)) or 'none'})",
                            "pass runs made by `runner study lesion|factors` of this entry (or the entry's own runs "
                            "for the full recipe)")
        grouped.setdefault(by_off[off], []).append(folder)
    # A variant with no run given, whose switch had no effect on any host the runs had, was not run.
    hosts = [flags for f in folders if (flags := _run_flags(f)) is not None]
    skipped = {v.label: why for v in variants(mode, switches)
               if v.label not in grouped and v.changed is not None and hosts
               and all(v.changed.no_effect_on(h) for h in hosts)
               and (why := v.changed.no_effect_on(hosts[0], "the runs' hosts"))}
    return study(mode, entry, switches, grouped, skipped, include_nonconforming)


def study(mode: str, entry: Entry, switches: list[Switch], runs: dict[str, list[Path]], skipped: dict[str, str],
          include_nonconforming: bool = False, runs_per_variant: int | None = None) -> SavedStudy:
    summary = analyse(mode, entry, switches, runs, skipped, include_nonconforming, runs_per_variant)
    return save_study(mode, [f for folders in runs.values() for f in folders], summary)


def new_runs(request: StudyRequest) -> SavedStudy:
    """The lesion and factors rows' run (runner.study.registry): the row's name is the mode."""
    names = parse_names(request.arguments.get("switches"))
    return run(request.kind, request.entry, request.new_runs, request.options, names, request.slurm,
               request.include_nonconforming)


def given_runs(request: StudyRequest, runs: Callable[[], list[Path]]) -> SavedStudy:
    """The lesion and factors rows' ``--from-runs`` reader: the switches named, then the runs."""
    names = parse_names(request.arguments.get("switches"))
    return from_runs(request.kind, request.entry, runs(), names, request.include_nonconforming)
