"""The leaderboard as a site you can publish: a self-contained folder, relative links only.

::

    index.html                      the tasks and the reproductions at a glance
    style.css                       one style sheet (no script, nothing fetched from elsewhere)
    tasks/<task>.html               DAWNBench's four tables: reproduced rows first, the others folded
    reproductions/<entry>.html      every run of the entry: one curve, latency per backend, the
                                    median and spread, fingerprints, the `runner verify` command
    reproductions/<entry>/*.png     its plots (matplotlib)
    reproductions/<entry>/<run>/curve.tsv
    reproductions/<entry>/studies/<kind>-<stamp>.html
                                    each study of the entry (lesion, scaling, ...): its tables,
                                    plots and notes, every run it read linked to its bundle
    reproductions/<entry>/studies/<kind>-<stamp>/*.png
    bundles/<entry>-<run_id>.tar.gz each run's signed bundle (an archive's copied, a folder packed)
    keys/<keyid>.pub.json           the trusted keys that signed them
    .runner-site.json               what the runner wrote here (each file's sha256)

The site is written into a fresh folder beside the target and swapped in whole once complete
(``runner.leaderboard.site_folder``): a target that holds anything the runner did not write is
refused, naming it, and nothing of it is ever removed.

No page names a path of the machine that built it (the results folder, HOME, the checkout):
the site is written to be copied elsewhere and served as it is. Pages are Jinja2 templates
(``runner/leaderboard/templates/``, autoescaped); this module computes what they show.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import jinja2
from securesystemslib.signer import SSlibKey

from runner.bundle.tarball import pack_folder
from runner.dawnbench.claims import Claim
from runner.dawnbench.tasks import FORMAT_TASKS, FormatTask, format_task
from runner.errors import UserError
from runner.keys import public_key_dict
from runner import safe_read
from runner.leaderboard import formats, plots
from runner.leaderboard.reproductions import Reproduction
from runner.leaderboard.site_folder import build_into
from runner.leaderboard.studies import Study, read_plot
from runner.leaderboard.tables import OBJECTIVES, Row, Table, aggregate, ledger_note
from runner.results.layout import short_id
from runner.verify.verdict import WORDS

STYLE = "style.css"
TASKS_DIR = "tasks"
REPRODUCTIONS_DIR = "reproductions"
BUNDLES_DIR = "bundles"
KEYS_DIR = "keys"
UP = "../"  # from a page one folder down to the site's root

_TEMPLATES = jinja2.PackageLoader("runner.leaderboard", "templates")  # the pages' templates and the style sheet
_ENV = jinja2.Environment(
    loader=_TEMPLATES,
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.") or "x"


def bundle_name(repro: Reproduction) -> str:
    """The archive's naming: ``<entry>-<run_id>.tar.gz``."""
    return f"{slug(repro.record.entry)}-{slug(repro.record.run_id)}.tar.gz"


def reproduction_page(entry: str) -> str:
    """The page of an entry's reproduction, relative to the site's root."""
    return f"{REPRODUCTIONS_DIR}/{slug(entry)}.html"


def run_anchor(repro: Reproduction) -> str:
    return f"run-{slug(repro.record.run_id)}"


def task_page(ft: FormatTask) -> str:
    return f"{TASKS_DIR}/{slug(ft.task_id)}.html"


def study_page(study: Study) -> str:
    """A study's page, relative to the site's root."""
    return f"{REPRODUCTIONS_DIR}/{slug(study.entry)}/studies/{slug(study.name)}.html"


STUDY_UP = "../../../"  # from a study's page to the site's root


# -- what the pages show ------------------------------------------------------------------------

@dataclass
class RowView:
    """One row of a leaderboard table, every figure already written as DAWNBench wrote it."""

    rank: int
    claimed: str
    reproduced: str | None  # None: not reproduced
    link: str | None  # the reproduction's run, relative to the site's root
    counts: bool  # the figure is the median of runs that count
    reason: str  # when no run counts: why the newest does not
    spread: str
    ratio: str
    model: str
    team: str
    hardware: str
    not_compared: str
    framework: str
    date: str


@dataclass
class TableView:
    id: str
    title: str
    criterion: str
    column: str
    reproduced: list[RowView]
    not_reproduced: list[RowView]


def _row_view(table: Table, row: Row) -> RowView:
    repro = row.reproduction
    spread = row.spread if row.reproduced is not None else None  # the runs behind a figure that counts
    counts = spread is not None
    return RowView(
        rank=row.rank, claimed=table.show(row.claimed),
        reproduced=None if repro is None else table.show_reproduced(row.reproduced) if counts else "—",
        link=None if repro is None else f"{reproduction_page(repro.record.entry)}#{run_anchor(repro)}",
        counts=counts, reason="" if repro is None or counts else repro.reason,
        spread="; ".join(x for x in (table.show_spread(spread) if spread is not None else "", row.ledger, row.rules) if x),
        ratio=formats.ratio(row.ratio) if counts else "—",
        model=row.model, team=row.team, hardware=row.hardware, not_compared=row.not_compared,
        framework=row.framework, date=formats.month(row.date),
    )


def table_view(table: Table) -> TableView:
    """A table's rows, the reproduced ones first (in rank order), then those not reproduced."""
    rows = [_row_view(table, row) for row in table.rows]
    return TableView(table.id, table.title, table.criterion, table.column,
                     [r for r in rows if r.reproduced is not None], [r for r in rows if r.reproduced is None])


def table_html(table: Table) -> str:
    """One table as the task page shows it (root-relative links)."""
    return _ENV.get_template("table.html").render(table=table_view(table), root="")


@dataclass
class Summary:
    """An objective's figure over the entry's runs: the median and spread of the runs that
    count (an objective no run counts for has no summary)."""

    title: str
    median: str
    spread: str


@dataclass
class RunView:
    repro: Reproduction
    short: str
    anchor: str
    verdict: str
    tta: str
    cost: str
    latency: list[str]
    bundle: str | None
    curve: str | None
    verify: str
    fingerprint: list[tuple[str, str]]


@dataclass
class StudyRunView:
    """A run a study read: where the site shows it (``link`` from the root; None when the run
    is not on the site) and its verdict (``RunView.repro.verdict``)."""

    run_id: str
    short: str
    run: RunView | None  # None: no result of that id in the results read
    link: str | None
    on_study_page: bool  # a study variant: its row is on the study's page, not the entry's


@dataclass
class StudyView:
    study: Study
    page: str
    plots: list[tuple[str, str]]  # (file relative to the study's page, caption)
    runs: list[StudyRunView]

    @property
    def verified(self) -> int:
        """The runs it read that verify (a study's variants verify, and never count)."""
        return sum(1 for r in self.runs if r.run is not None and r.run.repro.verdict.verified)

    @property
    def headline(self) -> str:
        """The first table's title, and what its rows are when that is one or two things (the
        scaling study's series: processes on one host, Slurm nodes)."""
        if not self.study.tables:
            return (self.study.notes or [""])[0]
        first = self.study.tables[0]
        kinds = list(dict.fromkeys(row[0] for row in first.rows if row))
        return first.title + (f" ({'; '.join(kinds)})" if 0 < len(kinds) <= 2 else "")


@dataclass
class EntryView:
    entry: str
    ft: FormatTask
    page: str
    runs: list[RunView]
    summaries: list[Summary]
    claims: list[Claim]
    entry_claim: str
    curve_png: str | None
    latency_pngs: list[str] = field(default_factory=list)
    studies: list[StudyView] = field(default_factory=list)
    variant_runs: int = 0  # study variants shown on their studies' pages instead

    @property
    def counting(self) -> int:
        return sum(r.repro.counts for r in self.runs)

    def summary(self, title: str) -> Summary | None:
        return next((s for s in self.summaries if s.title == title), None)


@dataclass(frozen=True)
class TaskCount:
    """What the index counts for a task, in the words the task page uses: the claims its
    tables rank (DAWNBench's submissions and entries' own claimed figures) and the entries
    with a figure from runs that count."""

    claims: int
    entries: int


def _task_count(ft: FormatTask, tables: list[Table]) -> TaskCount:
    rows = [row for t in tables if t.task.task_id == ft.task_id for row in t.rows]
    claims = {row.claim.name if row.claim is not None else f"entry:{row.team}"
              for row in rows if row.claimed is not None}
    entries = {row.reproduction.record.entry for row in rows
               if row.reproduction is not None and row.reproduced is not None and row.spread is not None}
    return TaskCount(len(claims), len(entries))


def _summaries(ft: FormatTask, runs: list[Reproduction]) -> list[Summary]:
    out = []
    for objective in OBJECTIVES:
        table = Table(ft, objective)
        _, value, spread = aggregate(runs, objective)
        if value is None:
            continue
        unit = " (ms)" if objective.id == "inference-latency" else ""
        note = "; ".join(x for x in (table.show_spread(spread) if spread else "", ledger_note(runs)) if x)
        out.append(Summary(objective.title + unit, table.show_reproduced(value), note))
    return out


def _fingerprint_rows(fp: dict | None) -> list[tuple[str, str]]:
    """What the host was, from its fingerprint: nothing of it names a path."""
    if not fp:
        return []
    def get(*keys):
        data: object = fp
        for key in keys:
            data = data.get(key) if isinstance(data, dict) else None
        return data
    gpus = get("gpu", "gpus")
    gpu_names = [str(g.get("name")) for g in gpus if isinstance(g, dict)] if isinstance(gpus, list) else []
    memory = get("memory", "total_bytes")
    rows = [
        ("CPU", f"{get('cpu', 'model_name') or '?'} ({get('cpu', 'architecture') or '?'}), "
                f"{get('cpu', 'usable_cores') or get('cpu', 'logical_cores') or '?'} usable cores"),
        ("Memory", f"{memory / 2**30:.1f} GiB" if isinstance(memory, (int, float)) else "?"),
        ("GPUs", ", ".join(gpu_names) if gpu_names else "none"),
        ("OS", f"{get('os', 'distro') or '?'}, kernel {get('os', 'kernel') or '?'}"),
        ("Engine", f"{get('docker', 'product') or get('docker', 'engine') or '?'} {get('docker', 'version') or ''}".strip()),
        ("Captured", str(get("captured_at") or "?")),
    ]
    return rows


def _verify_command(repro: Reproduction, bundle: str | None, keys: dict[str, str]) -> str:
    target = bundle or "RESULT.tar.gz"  # a result folder never bundled: nothing to point at
    key = keys.get(repro.signer_keyid or "")
    return f"runner verify {target} --trusted-keys {key or 'PUBLISHER.pub.json'}"


def _copy_bundle(repro: Reproduction, out: Path) -> str | None:
    """The run's signed bundle in the site: an archive copied, a result folder packed as
    ``runner bundle pack`` packs it; None when there is no bundle to copy."""
    rel = f"{BUNDLES_DIR}/{bundle_name(repro)}"
    target = out / rel
    if target.exists():  # the same run read twice (a folder and its archive): one bundle
        return rel
    if repro.archive is not None:  # from the results folder: copied as untrusted input (no FIFO, no link)
        try:
            _copy_file(repro.archive, target)
        except safe_read.Unreadable:
            target.unlink(missing_ok=True)  # in the site's fresh folder: the runner's own
            return None
    elif repro.bundled:
        try:
            pack_folder(repro.record.folder, target)
        except UserError:  # a folder pack refuses (a link inside it): shown without a bundle
            target.unlink(missing_ok=True)
            return None
    else:
        return None
    return rel


def _copy_file(source: Path, target: Path) -> None:
    with target.open("xb") as out:
        for chunk in safe_read.iter_chunks(source, "data"):
            out.write(chunk)


def _write_keys(out: Path, trusted_keys: list[SSlibKey], used: set[str]) -> dict[str, str]:
    """The trusted keys that signed a run shown, ``{keyid: path relative to the root}``."""
    written = {}
    for key in trusted_keys:
        if key.keyid in used and key.keyid not in written:
            rel = f"{KEYS_DIR}/{key.keyid[:16]}.pub.json"
            (out / rel).write_text(json.dumps(public_key_dict(key), indent=2, sort_keys=True) + "\n")
            written[key.keyid] = rel
    return written


def _latency_text(repro: Reproduction) -> list[str]:
    out = []
    for name, backend in sorted(repro.record.backends.items()):
        if not backend.passed_gate or backend.mean_ms is None:
            out.append(f"{name}: failed the accuracy gate" if not backend.passed_gate else f"{name}: not timed")
            continue
        p99 = (backend.latency_ms or {}).get("p99")
        out.append(f"{name}: mean {formats.milliseconds(backend.mean_ms)} ms"
                   + ("" if p99 is None else f", p99 {formats.milliseconds(p99)} ms"))
    return out


def _entry_view(out: Path, ft: FormatTask, entry: str, runs: list[Reproduction], claims: list[Claim],
                keys: dict[str, str]) -> EntryView:
    folder = out / REPRODUCTIONS_DIR / slug(entry)
    folder.mkdir(parents=True, exist_ok=True)
    page = reproduction_page(entry)
    views = [_run_view(out, entry, repro, keys) for repro in runs]
    names = {n for r in runs for n in r.record.dawnbench_claims}
    paired = [c for c in claims if c.name in names and c.task == ft.task_id]
    view = EntryView(entry, ft, page, views, _summaries(ft, runs), paired, _entry_claim(runs), None)
    curves = [plots.RunCurve(short_id(r.record.run_id), r.curve, r.counts) for r in runs if r.curve]
    if curves:
        train_claim = next((c for c in paired if c.kind == "train" and c.curve), None)
        plots.runs_curve(folder / "curve.png", ft, curves, train_claim.curve if train_claim else None)
        view.curve_png = f"{slug(entry)}/curve.png"
    backends = sorted({b for r in runs for b in r.latencies_ms})
    for backend in backends:
        series = [plots.RunLatencies(short_id(r.record.run_id), r.latencies_ms[backend], r.counts)
                  for r in runs if backend in r.latencies_ms]
        plots.latency_runs(folder / f"latency-{slug(backend)}.png", backend, series)
        view.latency_pngs.append(f"{slug(entry)}/latency-{slug(backend)}.png")
    return view


def _run_view(out: Path, entry: str, repro: Reproduction, keys: dict[str, str]) -> RunView:
    """A run as the site shows it; its curve.tsv and bundle copied into the site."""
    rec = repro.record
    curve = None
    if repro.curve_tsv is not None:
        curve = f"{REPRODUCTIONS_DIR}/{slug(entry)}/{slug(rec.run_id)}/curve.tsv"
        (out / curve).parent.mkdir(parents=True, exist_ok=True)
        (out / curve).write_bytes(repro.curve_tsv)
    bundle = _copy_bundle(repro, out)
    return RunView(
        repro=repro, short=short_id(rec.run_id), anchor=run_anchor(repro),
        verdict=repro.verdict.summary,
        tta=formats.tta(rec.tta_seconds, rec.tta_resolution_seconds) if rec.reached else "threshold not reached",
        cost=formats.dollars(rec.training_usd), latency=_latency_text(repro),
        bundle=bundle, curve=curve, verify=_verify_command(repro, bundle, keys),
        fingerprint=_fingerprint_rows(repro.fingerprint),
    )


def _study_view(out: Path, view: EntryView, study: Study, variants: dict[str, RunView]) -> StudyView:
    """A study's page data: its plots copied next to its page, each run it read linked to
    where the site shows it (the entry's page for the entry's own runs, the study's page for
    its variants)."""
    page = study_page(study)
    folder = out / page.removesuffix(".html")
    folder.parent.mkdir(parents=True, exist_ok=True)  # the page's folder, with or without plots
    plots = []
    for path, caption in study.plots:
        try:  # read again as untrusted input: it may have changed since the report was read
            data = read_plot(path, path.parent)
        except safe_read.Unreadable as err:
            study.left_out.append(f"{path.name}: {err.why}")
            continue
        folder.mkdir(parents=True, exist_ok=True)
        (folder / path.name).write_bytes(data)
        plots.append((f"{folder.name}/{path.name}", caption))
    own = {r.repro.record.run_id: r for r in view.runs}
    runs = []
    for run_id in study.runs:
        if run_id in variants:
            run = variants[run_id]
            runs.append(StudyRunView(run_id, run.short, run, f"{page}#{run.anchor}", True))
        elif run_id in own:
            run = own[run_id]
            runs.append(StudyRunView(run_id, run.short, run, f"{view.page}#{run.anchor}", False))
        else:
            runs.append(StudyRunView(run_id, short_id(run_id), None, None, False))
    return StudyView(study, page, plots, runs)


def _split_variants(runs: list[Reproduction], studies: list[Study]) -> tuple[list[Reproduction], list[Reproduction]]:
    """(the entry's own runs, study variants that a shown study read): a lesion or scaling
    study's variants belong on its page, not among the entry's reproductions."""
    read = {run_id for study in studies for run_id in study.runs}
    def variant(r: Reproduction) -> bool:
        return r.record.variant is not None and r.record.run_id in read
    return [r for r in runs if not variant(r)], [r for r in runs if variant(r)]


def _entry_claim(runs: list[Reproduction]) -> str:
    """The entry's own claim, as ``runner.claims`` says it applies."""
    comparison = next((r.claim for r in runs if r.claim is not None), None)
    if comparison is None:
        return ""
    parts = []
    if comparison.tta_seconds is not None:
        parts.append(f"time to accuracy {formats.run_duration(comparison.tta_seconds)}")
    if comparison.latency_ms is not None:
        parts.append(f"latency {formats.milliseconds(comparison.latency_ms)} ms")
    text = f"on {comparison.profile}: " + ", ".join(parts) if parts else ""
    return text + (f" ({comparison.why_not})" if text and comparison.why_not else "")


def _group(repros: list[Reproduction]) -> dict[tuple[str, str], list[Reproduction]]:
    """The runs of each entry (task, entry), counting first then newest first; a run read twice
    (its folder and its archive) once."""
    groups: dict[tuple[str, str], dict[str, Reproduction]] = {}
    for repro in sorted(repros, key=lambda r: (not r.counts, r.archive is None)):  # an archive copies faster
        runs = groups.setdefault((repro.record.task, repro.record.entry), {})
        runs.setdefault(repro.record.run_id, repro)
    ordered = {}
    for key, runs in sorted(groups.items()):
        newest_first = sorted(runs.values(), key=lambda r: r.record.run_id, reverse=True)
        ordered[key] = sorted(newest_first, key=lambda r: not r.counts)
    return ordered


def write_site(out: Path, tables: list[Table], claims: list[Claim], repros: list[Reproduction],
               trusted_keys: list[SSlibKey] | None = None, studies: list[Study] | None = None) -> Path:
    """Write the site as ``out``, built beside it and swapped in whole (``site_folder``): a
    folder holding anything the runner did not write is refused. Returns the index."""
    out = Path(out)
    build_into(out, lambda fresh: _write_pages(fresh, tables, claims, repros, trusted_keys or [], studies or []))
    return out / "index.html"


def _write_pages(out: Path, tables: list[Table], claims: list[Claim], repros: list[Reproduction],
                 trusted_keys: list[SSlibKey], studies: list[Study]) -> None:
    for name in (TASKS_DIR, REPRODUCTIONS_DIR, BUNDLES_DIR, KEYS_DIR):
        (out / name).mkdir()
    (out / STYLE).write_text(_TEMPLATES.get_source(_ENV, STYLE)[0], encoding="utf-8")
    keys = _write_keys(out, trusted_keys, {r.signer_keyid for r in repros if r.signer_keyid})
    shown_tasks = {t.task.task_id for t in tables}
    entries = []
    for (task, entry), runs in _group(repros).items():
        if task not in shown_tasks:
            continue
        of_entry = [st for st in studies if st.entry == entry]
        own, variants = _split_variants(runs, of_entry)
        view = _entry_view(out, format_task(task), entry, own, claims, keys)
        variant_views = {r.record.run_id: _run_view(out, entry, r, keys) for r in variants}
        view.studies = [_study_view(out, view, st, variant_views) for st in of_entry]
        view.variant_runs = len(variants)
        entries.append(view)
    tasks = [ft for ft in FORMAT_TASKS if ft.task_id in shown_tasks]
    common = {"tasks": tasks, "task_page": task_page, "built": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
              "words": WORDS}
    views = {ft.task_id: [table_view(t) for t in tables if t.task.task_id == ft.task_id] for ft in tasks}
    for ft in tasks:
        _render(out / task_page(ft), "task.html", root=UP, current=ft.task_id, ft=ft, tables=views[ft.task_id],
                entries=[e for e in entries if e.ft.task_id == ft.task_id], **common)
    for view in entries:
        _render(out / view.page, "reproduction.html", root=UP, current=view.ft.task_id, view=view, **common)
        for study in view.studies:
            _render(out / study.page, "study.html", root=STUDY_UP, current=view.ft.task_id, view=view,
                    study=study, **common)
    counts = {ft.task_id: _task_count(ft, tables) for ft in tasks}
    index = out / "index.html"
    _render(index, "index.html", root="", current="index", views=views, entries=entries, counts=counts,
            claims=sum(c.claims for c in counts.values()), reproductions=len(repros),
            verified=sum(r.verdict.verified for r in repros), counting=sum(r.counts for r in repros), **common)


def _render(path: Path, template: str, **context) -> None:
    path.write_text(_ENV.get_template(template).render(**context), encoding="utf-8")
