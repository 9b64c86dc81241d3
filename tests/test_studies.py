"""``runner study``: each study on the default entry's smoke runs with the real engine,
its summary checked against the runs' own results, and its report opened in a real
headless Chromium."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from runner.cli import main
from runner.errors import UserError
from runner.events import read_events
from runner.manifest.entry import validate_manifest
from runner.profiles import load_profile
from runner.profiles.profile import profile_from_dict
from runner.results.record import Result
from runner.plan import RunPlan
from runner.study.common import epoch_seconds
from runner.study.lesion import accuracy_at, host_cpu_flags
from runner.study.flops import MAX_COUNT, CountError, parse_count, read_result

pytestmark = pytest.mark.docker
REPO = Path(__file__).resolve().parent.parent
ENTRY = REPO / "entries" / "mnist-cnn-cpu"
PROBE = Path(__file__).parent / "entries" / "contract-probe"
PNG = b"\x89PNG\r\n\x1a\n"
CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    folder = tmp_path_factory.mktemp("study-results")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RUNNER_RESULTS", str(folder))
        yield folder


def studies(results: Path, kind: str) -> list[Path]:
    return sorted((results / "mnist-cnn-cpu" / "studies").glob(f"{kind}-*"))


def summary_of(study: Path) -> dict:
    return json.loads((study / "summary.json").read_text())


def run_folders(study: Path) -> list[Path]:
    return sorted(link.resolve() for link in (study / "runs").iterdir())


def is_png(path: Path) -> bool:
    return path.is_file() and path.read_bytes()[:8] == PNG and path.stat().st_size > 2000


@pytest.fixture(scope="module")
def stability(docker_client, results) -> Path:
    assert main(["study", "stability", str(ENTRY), "--smoke", "--runs", "2"]) == 0
    (study,) = studies(results, "stability")
    return study


def test_stability_summary_is_the_runs_own_figures(stability):
    summary, folders = summary_of(stability), run_folders(stability)
    assert len(folders) == 2 and all((f / "bundle").is_dir() for f in folders)  # signed runs
    results = [Result.read(f) for f in folders]
    assert len({r.seed for r in results}) == 2  # the runner drew the seeds
    ttas = {r.run_id: r.tta_seconds for r in results}
    assert {run["run_id"]: run["tta_seconds"] for run in summary["runs"]} == ttas
    reached = [t for t in ttas.values() if t is not None]
    assert summary["fraction_reached"] == len(reached) / 2
    # (A run another process disturbed on the shared engine may not reach: the summary
    # must still be the runs' own figures.)
    median = statistics.median(reached) if reached else None
    cv = statistics.stdev(reached) / statistics.mean(reached) if len(reached) == 2 else None
    assert summary["median_tta_seconds"] == pytest.approx(median)
    assert summary["coefficient_of_variation"] == pytest.approx(cv)
    assert is_png(stability / "curves.png")


def test_stability_of_runs_already_made_gives_the_same_figures(stability, results):
    folders = run_folders(stability)
    main(["study", "stability", str(ENTRY), "--from-runs", *map(str, folders)])
    again = [s for s in studies(results, "stability") if s != stability]
    assert len(again) == 1 and run_folders(again[0]) == folders
    first, second = summary_of(stability), summary_of(again[0])
    assert second["runs"] == first["runs"] and second["median_tta_seconds"] == first["median_tta_seconds"]


def test_threshold_ladder_agrees_with_the_result_tta_and_shows_misses(stability, results, tmp_path):
    folders = run_folders(stability)
    scored = [f for f in folders if Result.read(f).tta_seconds is not None]
    assert scored, "no smoke run reached the threshold"
    # A copy of a run whose evaluations scored 99.0%: the same events, a lower score.
    lowered = tmp_path / scored[0].name.replace("-s", "-s9")
    shutil.copytree(scored[0], lowered, symlinks=True)
    result = Result.read(lowered)
    result.run_id = lowered.name
    for ev in result.training.evaluations:
        ev["scores"]["top1"] = 0.99
    result.write(lowered)
    assert main(["study", "threshold", str(ENTRY), "--from-runs", *map(str, folders), str(lowered)]) == 0
    (study,) = studies(results, "threshold")
    summary = summary_of(study)
    assert summary["ladder_percent"] == [98.5, 99.0, 99.3, 99.5]
    by_run = {r["run_id"]: r for r in summary["runs"]}
    for folder in folders:
        at = {p["threshold_percent"]: p for p in by_run[folder.name]["thresholds"]}
        assert at[99.3]["tta_seconds"] == Result.read(folder).tta_seconds  # exactly the result's TTA
        times = [p["tta_seconds"] for p in by_run[folder.name]["thresholds"] if p["reached"]]
        assert times == sorted(times)  # a higher bar is never met sooner
    reached = {p["threshold_percent"]: p["reached"] for p in by_run[result.run_id]["thresholds"]}
    assert reached == {98.5: True, 99.0: True, 99.3: False, 99.5: False}
    assert "never reached" in (study / "report.html").read_text()
    assert is_png(study / "tta-vs-threshold.png")


def test_batch_size_runs_each_value_with_its_scaled_learning_rate(docker_client, results):
    assert main(["study", "batch-size", str(ENTRY), "--smoke", "--no-infer", "--values", "1024,256"]) == 0
    (study,) = studies(results, "batch-size")
    summary = summary_of(study)
    assert [r["global_batch_size"] for r in summary["runs"]] == [256, 1024]
    for row in summary["runs"]:
        folder = study / "runs" / row["run_id"]
        result = Result.read(folder)
        batch = row["global_batch_size"]
        assert result.hyperparameters == {"global_batch_size": str(batch), "lr": repr(0.2 * batch / 256)}
        assert not any("hyperparameter" in reason for reason in result.nonconforming_reasons)
        # The entry trained at the batch size the runner chose (it logs the one it used).
        logged = [e.value for e in read_events(folder / "events.jsonl") if e.key == "global_batch_size"]
        assert logged == [batch]
        seconds = epoch_seconds(folder)
        assert row["samples_per_second"] == pytest.approx(2048 * len(seconds) / sum(seconds))
        assert row["tta_seconds"] == result.tta_seconds
    assert is_png(study / "batch-size.png")


def _row_runs(study: Path, row: dict) -> list[Path]:
    return [study / "runs" / run["run_id"] for run in row["runs"]]


@pytest.fixture(scope="module")
def lesion(docker_client, results) -> Path:
    assert main(["study", "lesion", str(ENTRY), "--smoke", "--no-infer", "--runs", "1",
                 "--switches", "bf16,channels-last,large-batch"]) == 0
    (study,) = studies(results, "lesion")
    return study


def test_lesion_runs_each_switch_off_alone_as_a_signed_marked_variant(lesion):
    summary = summary_of(lesion)
    rows = {r["label"]: r for r in summary["variants"]}
    assert list(rows) == ["full recipe", "without bf16", "without channels-last", "without large-batch"]
    # bf16 autocast is already off on a CPU without bf16 units: reported so, not run.
    bf16 = rows["without bf16"]
    if {"amx_bf16", "avx512_bf16"} & set(host_cpu_flags()):
        assert bf16["ran"] and bf16["no_effect"] is None and len(bf16["runs"]) == 1
    else:
        assert not bf16["ran"] and bf16["runs"] == [] and "no effect on this host" in bf16["no_effect"]
    for row in summary["variants"]:
        for folder in _row_runs(lesion, row):
            result = Result.read(folder)
            assert (folder / "bundle").is_dir() and result.smoke  # a runner run, signed
            assert result.variant == ({"switches_off": row["switches_off"]} if row["switches_off"] else None)
            env = RunPlan.read(folder).train_env()  # what the container was given
            assert sorted(k for k in env if k.startswith("RUNNER_SWITCH_")) == sorted(
                f"RUNNER_SWITCH_{n.upper().replace('-', '_')}" for n in row["switches_off"] if n != "large-batch")
            assert row["runs"][0]["tta_seconds"] == result.tta_seconds
        ttas = [run["tta_seconds"] for run in row["runs"] if run["reached"]]
        assert row["median_tta_seconds"] == (statistics.median(ttas) if ttas else None)
    # The batch switch: the entry trained at the declared batch, the learning rate scaled.
    (small,) = _row_runs(lesion, rows["without large-batch"])
    assert [e.value for e in read_events(small / "events.jsonl") if e.key == "global_batch_size"] == [64]
    assert Result.read(small).hyperparameters == {"global_batch_size": "64", "lr": "0.05"}
    # A variant that never reached: its accuracy at the full recipe's TTA, from its curve.
    full = rows["full recipe"]["median_tta_seconds"]
    for row in rows.values():
        for run, folder in zip(row["runs"], _row_runs(lesion, row)):
            if not run["reached"] and full is not None:
                assert run["accuracy_at_full_recipe_tta_percent"] == accuracy_at(folder, full)
    assert is_png(lesion / "lesion.png")
    assert "leave them out" in (lesion / "report.html").read_text()


def test_the_lesion_table_reads_at_80_columns_with_every_figure_whole(lesion):
    from rich.console import Console

    from runner.cli.study import _FIGURE, study_tables
    from runner.study import lesion as lesion_study
    from runner.study.common import SavedStudy

    out = lesion_study.present(SavedStudy(lesion, summary_of(lesion)))
    console = Console(width=80, record=True)
    for table in study_tables(out):
        console.print(table)
    text = console.export_text()
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 80 and "…" not in text
    (table,) = out.tables
    figures = [cell for row in table.rows for cell in row[2:] if cell != "--" and _FIGURE.fullmatch(cell)]
    assert figures and all(f" {cell}" in text for cell in figures), (figures, text)  # none split over lines
    assert any("no effect on this host" in note for note in out.notes) == (
        "not run" in [row[2] for row in table.rows])  # a variant not run says why, below the table


def test_factor_analysis_adds_each_switch_back_and_reads_runs_already_made(lesion, results, capsys):
    assert main(["study", "factors", str(ENTRY), "--smoke", "--no-infer", "--runs", "1",
                 "--switches", "one-cycle"]) == 0
    (study,) = studies(results, "factors")
    summary = summary_of(study)
    assert [(r["label"], r["switches_off"]) for r in summary["variants"]] == [
        ("every switch off", ["one-cycle"]), ("+ one-cycle (full recipe)", [])]
    (off,) = _row_runs(study, summary["variants"][0])
    (full,) = _row_runs(study, summary["variants"][1])
    assert RunPlan.read(off).train_env()["RUNNER_SWITCH_ONE_CYCLE"] == "0" and Result.read(full).variant is None
    assert summary["full_recipe"]["median_tta_seconds"] == Result.read(full).tta_seconds
    assert is_png(study / "factors.png")
    # The lesion's runs, read again as a factor analysis of the batch switch (no new run).
    rows = {r["label"]: r for r in summary_of(lesion)["variants"]}
    given = [*_row_runs(lesion, rows["full recipe"]), *_row_runs(lesion, rows["without large-batch"])]
    assert main(["study", "factors", str(ENTRY), "--switches", "large-batch", "--from-runs", *map(str, given)]) == 0
    again = [s for s in studies(results, "factors") if s != study]
    assert len(again) == 1 and sorted(run_folders(again[0])) == sorted(f.resolve() for f in given)
    assert [len(r["runs"]) for r in summary_of(again[0])["variants"]] == [1, 1]
    # A run of another variant belongs to no bar of this study: refused, naming it.
    capsys.readouterr()
    assert main(["study", "factors", str(ENTRY), "--switches", "one-cycle", "--from-runs", str(given[1])]) == 2
    assert "is not a run of any variant of this factors study" in capsys.readouterr().err


def test_the_leaderboard_site_links_each_study_and_shows_its_variants_there(lesion, results, tmp_path):
    """Issue 39 item 4 on the real lesion study above: the entry's page links the study's page,
    which shows the report's tables and plot, and lists every run it read: the study's variants
    there (each with its bundle), the entry's own runs linked to their rows on the entry's page."""
    from html import escape

    from test_leaderboard import _links_resolve, _Page

    from runner.results.layout import entry_runs, short_id

    site = tmp_path / "site"
    assert main(["leaderboard", "--results", str(results), "--html", str(site), "--task", "mnist"]) == 0
    report = json.loads((lesion / "report.json").read_text())
    assert report["kind"] == "lesion" and sorted(report["runs"]) == sorted(p.name for p in (lesion / "runs").iterdir())
    entry_page = site / "reproductions" / "mnist-cnn-cpu.html"
    study_page = site / "reproductions" / "mnist-cnn-cpu" / "studies" / f"{lesion.name}.html"
    entry_html, study_html = entry_page.read_text(), study_page.read_text()
    assert f'href="../reproductions/mnist-cnn-cpu/studies/{lesion.name}.html"' in entry_html
    assert 'href="reproductions/mnist-cnn-cpu.html#studies"' in (site / "index.html").read_text()
    for table in report["tables"]:
        for row in table["rows"]:
            for cell in row:
                assert f">{escape(cell)}</td>" in study_html, cell
    assert (study_page.parent / lesion.name / "lesion.png").read_bytes() == (lesion / "lesion.png").read_bytes()
    variants = 0
    for run_id in report["runs"]:
        result = Result.read(lesion / "runs" / run_id)
        if result.variant is not None:  # a switch off: on the study's page with its bundle, not the entry's
            variants += 1
            assert f'id="run-{run_id}"' in study_html and f"bundles/mnist-cnn-cpu-{run_id}.tar.gz" in study_html
            assert run_id not in entry_html
        else:
            assert f"mnist-cnn-cpu.html#run-{run_id}" in study_html and f'id="run-{run_id}"' in entry_html
            assert short_id(run_id) in study_html
    # Every study's variants (this module's factor analyses read some too) are counted on the entry's page.
    every = {run for study in (results / "mnist-cnn-cpu" / "studies").iterdir()
             for run in json.loads((study / "report.json").read_text())["runs"]}
    shown = sum(Result.read(p).variant is not None for p in entry_runs(results, "mnist-cnn-cpu") if p.name in every)
    assert variants >= 1 and shown >= variants
    assert f"{shown} runs with a switch off" in " ".join(entry_html.split())
    for page in (entry_page, study_page, site / "index.html"):
        parsed = _Page()
        parsed.feed(page.read_text())
        assert _links_resolve(site, page, parsed) > 3
    # Published as it is: no file of the site names the results folder or this checkout.
    for path in (p for p in site.rglob("*") if p.is_file()):
        data = path.read_bytes()
        assert str(results).encode() not in data and str(REPO).encode() not in data, path


def test_scaling_runs_one_and_two_processes_and_measures_the_speed_up(docker_client, results):
    assert main(["study", "scaling", str(ENTRY), "--smoke", "--no-infer", "--runs", "1", "--processes", "2"]) == 0
    (study,) = studies(results, "scaling")
    summary = summary_of(study)
    (host,) = summary["series"]
    one, two = host["points"]
    assert (one["processes"], two["processes"]) == (1, 2)
    by_count = {r["processes"]: r for r in summary["runs"]}
    single, pair = study / "runs" / by_count[1]["run_id"], study / "runs" / by_count[2]["run_id"]
    assert Result.read(single).variant is None  # the manifest's own placement
    assert Result.read(pair).variant == {"nodes": 1, "processes_per_node": 2}
    assert (pair / "logs" / "train-rank1.log").is_file() and not (single / "logs" / "train-rank1.log").exists()
    # The speed-ups are the runs' own figures: time per epoch the runner's, TTA the results'.
    assert one["median_epoch_seconds"] == statistics.median(epoch_seconds(single))
    assert two["epoch_speedup"] == pytest.approx(one["median_epoch_seconds"] / two["median_epoch_seconds"])
    assert two["epoch_efficiency"] == pytest.approx(two["epoch_speedup"] / 2)
    if one["median_tta_seconds"] and two["median_tta_seconds"]:
        assert two["tta_speedup"] == pytest.approx(Result.read(single).tta_seconds / Result.read(pair).tta_seconds)
    # Communication: the entry's own figure, logged by rank 0 only when there are several.
    assert by_count[1]["communication_seconds"] == [] and len(by_count[2]["communication_seconds"]) == 1
    assert is_png(study / "scaling.png")


def test_batch_size_needs_declared_hyperparameters(docker_client, results, capsys):
    assert main(["study", "batch-size", str(PROBE), "--smoke", "--values", "64"]) == 2
    err = capsys.readouterr().err
    assert "declares no tunable hyperparameters" in err and "hyperparameters:" in err
    assert not (results / "contract-probe").exists()  # refused before any run


def test_roofline_sets_counted_flops_against_the_run_and_the_peak(stability, results):
    folder = run_folders(stability)[0]
    assert main(["study", "roofline", str(ENTRY), "--from-runs", str(folder)]) == 0
    (study,) = studies(results, "roofline")
    summary = summary_of(study)
    counted = summary["counted"]
    # The default entry's convolutions and linear layers, by hand: 2 x MACs.
    by_hand = 2 * (16 * 16 * 196 + 32 * 16 * 9 * 196 + 64 * 32 * 9 * 49 + 576 * 256 + 256 * 10)
    assert counted["inference_item"]["flops"] == by_hand
    # Backward is two forwards: a training step is about three inferences per sample.
    assert counted["train_step"]["flops"] == pytest.approx(3 * 256 * by_hand, rel=0.05)
    result = Result.read(folder)
    points = {p["name"]: p for p in summary["points"]}
    for backend, record in result.inference.items():
        point = points[f"inference {backend}"]
        if record.mean_ms is None:  # a smoke model that missed the gate was not timed: no figure
            assert point["flops_per_second"] is None and not record.passed_gate
            continue
        assert point["flops_per_second"] == pytest.approx(by_hand / (record.mean_ms / 1000))
    seconds = epoch_seconds(folder)
    train = points["training"]["flops_per_second"]
    assert train == pytest.approx(counted["train_step"]["flops"] / 256 * 2048 * len(seconds) / sum(seconds))
    peak = load_profile("cpu-2core-x86").peak
    assert points["training"]["fraction_of_peak"]["fp32"] == pytest.approx(train / (peak.tflops["fp32"] * 1e12))
    assert is_png(study / "roofline.png")
    # Counted in the run's own image, and the study says whose figures they are.
    assert counted["image"] == {"id": result.image.id, "rebuilt": False}
    assert counted["counted_by"] == "the entry's own image"
    assert "FLOPs and bytes are counted by the entry" in (study / "report.html").read_text()


def poisoned_copy(source: Path, target: Path, entry_files: str, marker: Path) -> Path:
    """``source`` copied, the builder's module in its ``entry_files`` folder writing ``marker``
    whenever it is imported."""
    shutil.copytree(source, target, symlinks=True)
    model = target / entry_files / "model.py"
    model.write_text(f"import pathlib; pathlib.Path({str(marker)!r}).write_text('imported')\n" + model.read_text())
    return target


def test_roofline_imports_no_entry_code_on_the_host(stability, results, tmp_path):
    marker = tmp_path / "imported-on-the-host"
    # The run's signed entry files (what the host used to import) and the ENTRY folder named.
    run = poisoned_copy(run_folders(stability)[0], tmp_path / "run" / "20990101T000000Z-s1-poison", "entry", marker)
    entry = poisoned_copy(ENTRY, tmp_path / "entry" / "mnist-cnn-cpu", ".", marker)
    # The poison works: importing either builder module on the host writes the marker.
    for folder in (run / "entry", entry):
        subprocess.run([sys.executable, "-c", "import model"], cwd=folder, capture_output=True,
                       env={**os.environ, "PYTHONPATH": str(folder)})
        assert marker.read_text() == "imported"
        marker.unlink()
    before = set(studies(results, "roofline"))
    assert main(["study", "roofline", str(entry), "--from-runs", str(run)]) == 0
    assert not marker.exists()  # no host process imported the builder
    (study,) = set(studies(results, "roofline")) - before
    counted = summary_of(study)["counted"]
    assert counted["image"]["id"] == Result.read(run).image.id  # counted in the run's image instead
    assert counted["inference_item"]["flops"] > 0


GONE_TAG = "runner/entry/mnist-cnn-cpu:gone"


def test_roofline_finds_or_rebuilds_a_missing_image_the_way_reproduce_builds(stability, results, tmp_path, capsys):
    source = run_folders(stability)[0]
    image = Result.read(source).image
    gone = "sha256:" + "0" * 64

    def copy_with(name: str, image_id: str, tag: str) -> Path:
        run = tmp_path / name
        shutil.copytree(source, run, symlinks=True)
        result = Result.read(run)
        result.image.id, result.image.tag = image_id, tag
        result.write(run)
        return run

    # The id is gone, the tag (the same content key) is there: that image counts, marked rebuilt.
    # The id and tag are gone: build_entry on the run's entry files finds (or builds) it.
    for run in (copy_with("20990101T000000Z-s1-bytag", gone, image.tag),
                copy_with("20990101T000000Z-s1-rebuild", gone, GONE_TAG)):
        before = set(studies(results, "roofline"))
        assert main(["study", "roofline", str(ENTRY), "--from-runs", str(run)]) == 0
        (study,) = set(studies(results, "roofline")) - before
        assert summary_of(study)["counted"]["image"] == {"id": image.id, "rebuilt": True}
    # Nothing to rebuild from (the manifest kept, the Dockerfile lost): one line naming the fix.
    bare = copy_with("20990101T000000Z-s1-bare", gone, GONE_TAG)
    (bare / "entry" / "Dockerfile").unlink()
    capsys.readouterr()
    assert main(["study", "roofline", str(ENTRY), "--from-runs", str(bare)]) == 2
    err = capsys.readouterr().err
    assert "is gone from the engine" in err and "runner build entries/mnist-cnn-cpu" in err


# -- the count comes from the entry's image: its numbers are untrusted -------------------------

GOOD_COUNT = {"batch_size": 256, "parameters": 174058, "torch": "2.13.0+cpu",
              "train_step": {"flops": 3_056_336_896, "bytes": 183_512_840},
              "inference_item": {"flops": 4_013_056, "bytes": 2_154_320}}


def test_a_count_is_rebuilt_field_by_field_with_the_hosts_batch():
    forged = {**GOOD_COUNT, "batch_size": 1, "points": "extra", "train_step": {**GOOD_COUNT["train_step"], "x": 1}}
    counted = parse_count(json.dumps(forged), 256)
    assert counted == GOOD_COUNT  # the host's batch size, no extra keys


@pytest.mark.parametrize("forge", [
    lambda c: c["train_step"].update(flops=float("nan")),
    lambda c: c["train_step"].update(flops=float("inf")),
    lambda c: c["train_step"].update(flops=1.5e9),
    lambda c: c["train_step"].update(bytes=-1),
    lambda c: c["inference_item"].update(flops=True),
    lambda c: c["inference_item"].update(flops="4013056"),
    lambda c: c["inference_item"].update(flops=MAX_COUNT + 1),
    lambda c: c["inference_item"].update(bytes=0),
    lambda c: c["inference_item"].update(flops=10**4000),
    lambda c: c.update(parameters=-5),
    lambda c: c.update(torch="x" * 65),
    lambda c: c.update(torch="2.13\n\x1b[31m"),
    lambda c: c.update(torch="[link=file:///etc]2.13[/link]"),
    lambda c: c.pop("train_step"),
    lambda c: c.update(inference_item=[1, 2]),
])
def test_a_forged_count_is_refused(forge):
    count = json.loads(json.dumps(GOOD_COUNT))
    forge(count)
    with pytest.raises(CountError):
        parse_count(json.dumps(count), 256)  # NaN and Infinity as Python's json writes them


@pytest.mark.parametrize("text", ["[]", "nope", "NaN", '{"a": ' * 100_000, '"' + "x" * 10 + '"'])
def test_a_count_that_is_not_an_object_is_refused(text):
    with pytest.raises(CountError):
        parse_count(text, 256)


def test_the_count_file_is_read_only_as_a_small_regular_file(tmp_path):
    (tmp_path / "secret").write_text(json.dumps(GOOD_COUNT))
    (tmp_path / "flops.json").symlink_to(tmp_path / "secret")  # a link to a host file
    with pytest.raises(CountError):
        read_result(tmp_path)
    (tmp_path / "flops.json").unlink()
    os.mkfifo(tmp_path / "flops.json")  # no writer: a blocking read would hang
    with pytest.raises(CountError, match="regular file"):
        read_result(tmp_path)
    (tmp_path / "flops.json").unlink()
    (tmp_path / "flops.json").write_text(" " * (64 * 1024 + 1))
    with pytest.raises(CountError, match="bytes"):
        read_result(tmp_path)
    (tmp_path / "flops.json").write_text(json.dumps(GOOD_COUNT))
    assert parse_count(read_result(tmp_path), 256) == GOOD_COUNT


def test_a_folder_that_is_not_a_run_is_refused_with_the_fix(tmp_path, capsys):
    assert main(["study", "threshold", str(ENTRY), "--from-runs", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "is not a run folder" in err and "runner reproduce" in err
    assert main(["study", "batch-size", str(ENTRY), "--values", "32,big"]) == 2
    assert "--values 32,128,512,2048" in capsys.readouterr().err


# -- the schemas the studies rest on ----------------------------------------------------------

def test_manifest_hyperparameters_are_validated():
    manifest = yaml.safe_load((ENTRY / "entry.yaml").read_text())
    validate_manifest(manifest)
    manifest["hyperparameters"]["lr_scaling"] = "cubic"
    with pytest.raises(UserError, match="lr_scaling"):
        validate_manifest(manifest)


def test_every_profile_with_a_peak_says_where_it_comes_from():
    data = yaml.safe_load((REPO / "hardware_profiles" / "cpu-2core-x86.yaml").read_text())
    assert "cores x clock x FLOPs per cycle" in " ".join(data["peak"]["source"].split())
    data["peak"]["tflops"] = {"fp8x": 1.0}
    with pytest.raises(UserError, match="peak"):
        profile_from_dict(data, "test")


# -- the report in a real browser -------------------------------------------------------------

@pytest.fixture(scope="session")
def chromium() -> Path:
    if not CHROMIUM.exists():
        subprocess.run(["apt-get", "update", "-q"], check=True, capture_output=True)
        subprocess.run(["apt-get", "install", "-y", "-q", "chromium"], check=True, capture_output=True)
    return CHROMIUM


CHECK_SCRIPT = """<script>
window.addEventListener("load", () => {
  const widths = [...document.images].map(i => i.naturalWidth);
  const tables = document.querySelectorAll("table.study-table").length;
  document.body.insertAdjacentHTML("beforeend",
    `<pre id="check">${JSON.stringify({widths, tables})}</pre>`);
});
</script>"""


def browse(chromium: Path, page: Path, tmp_path: Path, *extra: str) -> str:
    proc = subprocess.run(
        [str(chromium), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'chromium-profile'}", "--virtual-time-budget=5000",
         *extra, page.as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_reports_render_with_their_tables_and_images_in_chromium(chromium, stability, results, tmp_path):
    kinds = ("stability", "threshold", "batch-size", "roofline", "lesion", "factors", "scaling")
    for study in [s for kind in kinds for s in studies(results, kind)]:
        report = study / "report.html"
        probe = study / "report-check.html"  # the report plus the check, beside its images
        probe.write_text(report.read_text().replace("</body>", CHECK_SCRIPT + "</body>"))
        dom = browse(chromium, probe, tmp_path, "--dump-dom")
        probe.unlink()
        check = json.loads(dom.rsplit('<pre id="check">', 1)[1].split("</pre>")[0])  # the last: the script's own text has one
        assert check["tables"] >= 1 and check["widths"] and all(w > 0 for w in check["widths"]), study.name
    shot = results / "stability-report.png"
    browse(chromium, studies(results, "stability")[0] / "report.html", tmp_path,
           f"--screenshot={shot}", "--window-size=1100,1400")
    assert is_png(shot)
