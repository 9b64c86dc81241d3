"""Runs you can list and a terminal that fits (issue 40, items 2 and 3): ``runner ls``,
``runner show``, smoke runs kept apart from real ones, ``--json`` on the commands that read
results, and every table at 80 columns (the real CLI in-process, on synthetic signed results
made by the project's own functions: ``tests/synthetic_result.py``)."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest
from tests.hostile.hostile_helpers import run_cli
from rich.cells import cell_len
from rich.console import Console
from synthetic_result import edit_result, make_result_folder, new_signer, stage_mnist_stand_in

from runner.bundle import make_bundle, pack
from runner.dawnbench import import_dawnbench, save_claim
from runner.fingerprint import capture_host
from runner.results.layout import SMOKE_DIR, all_runs, entry_dir, entry_runs, short_id

ENTRY = "mnist-cnn-cpu"
FIXTURES = Path(__file__).parent / "data" / "dawnbench"
PACKAGE = Path(__file__).resolve().parents[1] / "runner"
REAL = ("20261122T010203Z-s0-aaaaaa", "20261123T010203Z-s5-c0997d")
SMOKE = "20261124T010203Z-s1-bbbbbb"  # under smoke/, signed
OLD_SMOKE = "20261121T010203Z-s2-dddddd"  # beside the real runs (the layout before), unsigned


def _copy(source: Path, target: Path, seed: int, **changes) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, target)
    shutil.rmtree(target / "bundle", ignore_errors=True)
    edit_result(target, run_id=target.name, seed=seed, **changes)
    return target


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """results/: two signed real runs, a signed smoke run under smoke/, an unsigned smoke run
    of the older layout, and DAWNBench's claims (long team and hardware names)."""
    root = tmp_path_factory.mktemp("runs")
    results, home = root / "results", root / "home"
    signer, keys = new_signer(root)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RUNNER_HOME", str(home))
        staged = stage_mnist_stand_in(home)
        first = make_result_folder(results / ENTRY / REAL[0], staged, capture_host())
        edit_result(first, conforming=True, nonconforming_reasons=[])
        second = make_result_folder(results / ENTRY / REAL[1], staged, capture_host(), seed=5)  # its own draw
        edit_result(second, conforming=True, nonconforming_reasons=[])
        smoke = _copy(first, entry_dir(results, ENTRY, True) / SMOKE, 1, smoke=True, conforming=False,
                      nonconforming_reasons=["smoke run on synthetic data"])
        old = _copy(first, results / ENTRY / OLD_SMOKE, 2, smoke=True, conforming=False,
                    nonconforming_reasons=["smoke run on synthetic data"])
        for folder in (first, second, smoke):
            make_bundle(folder, signer)
        make_bundle(old, None)
        report = import_dawnbench(FIXTURES)
        for claim in report.claims:
            save_claim(results, claim)
        yield results, keys  # RUNNER_HOME stays the board's: its data is what verify recomputes with


def _cli(capsys, monkeypatch, *argv, columns: int = 80):
    monkeypatch.setenv("COLUMNS", str(columns))
    return run_cli(capsys, *argv)


def assert_fits(text: str, width: int = 80, whole: tuple[str, ...] = ()) -> None:
    """No line wider than the terminal but a path or command of ``whole``, each a line of its
    own, whole (never folded: issue 50); nothing cut short with an ellipsis."""
    lines = [line.rstrip() for line in text.splitlines()]
    for item in whole:
        assert item in lines, f"{item} is not a line of its own"
    wide = [line for line in lines if cell_len(line) > width and line not in whole]
    assert not wide, "\n".join(wide)
    assert "…" not in text, text


# -- where runs live --------------------------------------------------------------------------
def test_smoke_runs_are_kept_apart_and_the_older_layout_still_reads(board, tmp_path):
    results, _ = board
    assert entry_dir(results, ENTRY, False) == results / ENTRY
    assert entry_dir(results, ENTRY, True) == results / ENTRY / SMOKE_DIR
    assert [p.name for p in entry_runs(results, ENTRY)] == sorted([*REAL, SMOKE, OLD_SMOKE])
    (results / ENTRY / "studies" / "stability-x").mkdir(parents=True)  # a study's folder is no run
    assert [p.name for p in all_runs(results)] == sorted([*REAL, SMOKE, OLD_SMOKE])  # claims/ is no entry
    assert short_id(REAL[1]) == "s5-c0997d" and short_id("placeholder") == "placeholder"


def test_reinfer_picks_the_newest_real_run_in_either_layout(board, monkeypatch):
    from runner.reinference import latest_result

    results, _ = board
    monkeypatch.setenv("RUNNER_RESULTS", str(results))
    assert latest_result(ENTRY).name == REAL[1]  # not the newer smoke run under smoke/


def test_no_module_globs_run_folders_by_hand():
    """Run folders are listed by ``runner.results.layout`` alone: a reader that globbed
    ``<entry>/*/result.json`` itself would miss the smoke runs kept under ``smoke/``."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).as_posix() == "results/layout.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) in ("glob", "rglob") and node.args:
                pattern = ast.unparse(node.args[0])
                if "*/" in pattern and ("result.json" in pattern or "RESULT_FILE" in pattern or "output" in pattern):
                    offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {pattern}")
    assert offenders == [], offenders


# -- runner ls ----------------------------------------------------------------------------------
def test_ls_lists_one_row_per_run_real_before_smoke_at_80_columns(board, capsys, monkeypatch):
    results, keys = board
    code, out, err = _cli(capsys, monkeypatch, "ls", "--results", str(results), "--trusted-keys", str(keys))
    assert code == 0, err
    assert_fits(out)
    rows = [line.split() for line in out.splitlines() if line[:1] == "s" and "-" in line.split()[0]]
    assert [r[0] for r in rows] == ["s0-aaaaaa", "s5-c0997d", "s2-dddddd", "s1-bbbbbb"]  # real runs first
    assert rows[1] == ["s5-c0997d", "complete", "yes", "10.12", "yes", "no", "counts"]
    # smoke runs never count (the signed one is a smoke run of real data: it does not verify either)
    assert rows[2][-2:] == ["yes", "no"] and rows[3][-2:] == ["yes", "no"]
    assert REAL[0] not in out  # the full id is in --json and the folders
    assert f"{ENTRY} (4 runs)" in out


def test_ls_json_has_the_full_ids_folders_and_verdicts(board, capsys, monkeypatch):
    results, keys = board
    code, out, _ = _cli(capsys, monkeypatch, "ls", f"entries/{ENTRY}", "--results", str(results),
                        "--trusted-keys", str(keys), "--json")
    assert code == 0
    runs = {r["run_id"]: r for r in json.loads(out)["runs"]}
    assert set(runs) == {*REAL, SMOKE, OLD_SMOKE}
    assert runs[REAL[1]]["short_id"] == "s5-c0997d" and runs[REAL[1]]["verified"] is True
    assert runs[SMOKE]["folder"] == str(results / ENTRY / SMOKE_DIR / SMOKE) and runs[SMOKE]["smoke"] is True
    assert runs[REAL[1]]["counts"] is True and runs[REAL[1]]["verdict"] == "counts"
    assert runs[OLD_SMOKE]["verified"] is False and "unsigned" in runs[OLD_SMOKE]["reasons"][0]


def test_ls_and_show_name_a_studys_variants_so_none_is_read_as_the_recipe(board, capsys, monkeypatch, tmp_path):
    results, keys = board
    mine = tmp_path / "results"
    first = results / ENTRY / REAL[0]
    lesion = _copy(first, mine / ENTRY / "20261124T020000Z-s7-eeeeee", 7,
                   variant={"switches_off": ["one-cycle", "label-smoothing"]})
    placed = _copy(first, mine / ENTRY / "20261124T030000Z-s8-ffffff", 8,
                   variant={"nodes": 2, "processes_per_node": 1})
    _copy(first, mine / ENTRY / REAL[1], 5)
    code, out, err = _cli(capsys, monkeypatch, "ls", "--results", str(mine), "--trusted-keys", str(keys))
    assert code == 0, err
    assert_fits(out)
    rows = [line.split()[0] for line in out.splitlines()
            if line.startswith("s") and "-" in line and not line.split()[0].endswith(":")]
    assert rows == ["s5-c0997d", "s7-eeeeee*", "s8-ffffff*"]  # marked in the table, named below it
    assert "* s7-eeeeee: study variant, -one-cycle,label-smoothing" in out and "* s8-ffffff: study variant, 2 nodes x 1 process" in out
    code, out, _ = _cli(capsys, monkeypatch, "ls", "--results", str(mine), "--json")
    variants = {r["run_id"]: r["variant"] for r in json.loads(out)["runs"]}
    assert variants[lesion.name] == {"switches_off": ["one-cycle", "label-smoothing"]} and variants[REAL[1]] is None
    code, out, _ = _cli(capsys, monkeypatch, "show", "s8-ffffff", "--results", str(mine))
    assert code == 0 and placed.name in out
    assert "a study variant (2 node(s) x 1 process(es), not the manifest's placement)" in " ".join(out.split())


def test_ls_of_nothing_says_so(tmp_path, capsys, monkeypatch):
    code, out, _ = _cli(capsys, monkeypatch, "ls", "--results", str(tmp_path / "none"))
    assert code == 0 and "no runs under" in out


# -- runner show --------------------------------------------------------------------------------
def test_show_by_short_id_draws_the_summary_curve_and_files_at_80_columns(board, capsys, monkeypatch):
    results, keys = board
    code, out, err = _cli(capsys, monkeypatch, "show", "s5-c0997d", "--results", str(results),
                          "--trusted-keys", str(keys))
    assert code == 0, err
    folder = str(results / ENTRY / REAL[1])
    assert_fits(out, whole=(folder, f"runner verify {folder}"))
    assert REAL[1] in out and "10.12 s (resolution 4.5 s)" in out
    assert "verdict     counts" in out and "at epoch 2: top1 99.50%" in out
    assert "◆" in out and "99.30%" in out and "training time, evaluations excluded" in out  # the curve
    assert "curve.tsv" in out and "runner verify" in out


@pytest.mark.parametrize("ref", [f"{ENTRY}/s5-c0997d", REAL[1], "20261123"])
def test_show_finds_a_run_by_its_id_its_start_or_entry_and_short_id(board, capsys, monkeypatch, ref):
    results, keys = board
    code, out, _ = _cli(capsys, monkeypatch, "show", ref, "--results", str(results), "--trusted-keys", str(keys),
                        "--json")
    assert code == 0 and json.loads(out)["run"]["run_id"] == REAL[1]


def test_show_json_and_a_bundle(board, capsys, monkeypatch, tmp_path):
    results, keys = board
    tarball = pack(results / ENTRY / REAL[0], tmp_path / "run.tar.gz")
    code, out, _ = _cli(capsys, monkeypatch, "show", str(tarball), "--trusted-keys", str(keys), "--json")
    assert code == 0
    data = json.loads(out)
    assert data["bundle"] is True and data["location"] == str(tarball) and data["run"]["verified"] is True
    assert [p["epoch"] for p in data["curve"]] == [1, 2, 3] and data["crossing"]["epoch"] == 2
    assert {"result", "curve", "events", "bundle"} <= set(data["files"])
    code, out, _ = _cli(capsys, monkeypatch, "show", str(tarball), "--trusted-keys", str(keys))
    assert code == 0 and "inside" in out
    assert_fits(out, whole=(str(tarball), f"runner verify {tarball}"))


@pytest.mark.parametrize("ref, needle", [("s9-ffffff", "no run 's9-ffffff'"), ("s", "could be any of 4 runs")])
def test_show_of_an_unknown_or_ambiguous_run_is_one_line(board, capsys, monkeypatch, ref, needle):
    results, _ = board
    code, out, err = _cli(capsys, monkeypatch, "show", ref, "--results", str(results))
    assert code == 2 and len(err.strip().splitlines()) == 1 and needle in err and "Fix:" in err


# -- the other readers, at 80 columns and as JSON -------------------------------------------------
def test_the_leaderboard_fits_80_columns_and_has_json(board, capsys, monkeypatch):
    results, keys = board
    code, out, err = _cli(capsys, monkeypatch, "leaderboard", "--results", str(results), "--trusted-keys", str(keys))
    assert code == 0, err
    assert_fits(out)
    assert "Santiago Akle Serrano" in out and "not reproduced" in out and "10.12 s ✓" in out
    assert "Energy" not in out  # empty in every row: left out
    code, out, _ = _cli(capsys, monkeypatch, "leaderboard", "--results", str(results), "--trusted-keys", str(keys),
                        "--task", "mnist", "--json")
    data = json.loads(out)
    verdicts = {r["run_id"]: r["verified"] for r in data["reproductions"]}
    assert verdicts == {REAL[0]: True, REAL[1]: True, SMOKE: False, OLD_SMOKE: False}
    (time_table,) = [t for t in data["tables"] if t["id"] == "mnist-train-time"]
    assert time_table["rows"][0]["reproduced"] == 10.12 and time_table["rows"][0]["spread"]["runs"] == 2


def test_reproduces_records_fit_80_columns(board):
    from runner.cli.records import print_results

    results, _ = board
    folders = [results / ENTRY / name for name in REAL]
    loadgen = {"settings": {"profile": "dawnbench", "single_stream_min_query_count": 100,
                            "single_stream_min_duration_ms": 1000, "single_stream_max_duration_ms": 0,
                            "offline_min_duration_ms": 1000, "offline_max_duration_ms": 0},
               "single_stream": {"p50_ms": 0.2612, "p90_ms": 0.3011}, "offline": {"samples_per_s": 4123.4}}
    last = json.loads((folders[-1] / "result.json").read_text())
    edit_result(folders[-1], inference__torch__loadgen=loadgen,
          entry__claimed={"tta_seconds": 6.95, "profile": "cpu-2core-x86"},
          energy={"training": {"joules_to_accuracy": 1234.5, "window": {"measured": True}}})
    try:
        console = Console(width=80, record=True)
        print_results(console, folders)
        out = console.export_text()
    finally:
        (folders[-1] / "result.json").write_text(json.dumps(last, indent=2, sort_keys=True) + "\n")
    assert_fits(out)
    assert "s0-aaaaaa" in out and "s5-c0997d" in out and REAL[0] not in out
    assert "10.12" in out and "4.5" in out and "yes" in out and "True" not in out
    assert "SingleStream p50 ms" in out and "0.261" in out and "4123" in out  # LoadGen, in its own table
    assert "energy s5-c0997d: 1234.5 J to accuracy" in out
    assert "J / 10k" not in out  # measured for no backend: left out
    assert "claimed TTA 6.95 s" in out


def test_the_timings_table_keeps_moments_apart_from_durations():
    from runner.timings import render_timings

    table = render_timings({"phases": [{"name": "training", "seconds": 12.5, "parts": {
        "launch_seconds": 0.2, "evaluator_ready_at_seconds": 1.25}}], "total_seconds": 12.5})
    console = Console(width=80, record=True)
    console.print(table)
    out = console.export_text()
    rows = out.split("total")[0]
    assert "evaluator ready at" not in rows and "launch" in rows
    assert "moments, not durations: evaluator ready at 1.25 s on the entry's clock" in " ".join(out.split())
    assert_fits(out)


# -- what a run says while it runs --------------------------------------------------------------
def test_the_training_line_estimates_the_rest_and_says_scores_come_after_the_run(board):
    from runner.run.progress import TrainingProgress, earlier_run
    from runner.tasks import get_task

    results, _ = board
    expected = earlier_run(results, ENTRY, smoke=False)
    assert expected is not None and expected.run_id == REAL[1] and expected.epochs == 3
    console = Console(width=80, record=True, force_terminal=False)
    line = TrainingProgress(get_task("mnist"), "train", console=console, expected=expected, timeout_s=1200)
    line.update(epoch=1, elapsed=1.5)
    line.update(elapsed=5.7, evaluated=True)
    line.update(epoch=2, elapsed=6.0)
    console.print(line)
    line.update(epoch=3, elapsed=10.5)  # 4.5 s an epoch: about 4.5 s after this epoch's start
    line.update(elapsed=10.5)
    console.print(line)
    line.exited(15.0)
    line.update(score=0.995, scored=True)
    console.print(line)
    out = console.export_text()
    first, second, last = out.splitlines()
    assert first.startswith("train epoch 2/3 · 6 s · about ") and "1 checkpoint, scored after the run" in first
    assert "epoch 3/3 · 10 s · about 4 s left" in second or "epoch 3/3 · 11 s · about 4 s left" in second
    assert last == "train ran 15 s · scored 1/1 · top1 99.50% / 99.3%"
    long = TrainingProgress(get_task("mnist"), "train", console=console, timeout_s=7 * 24 * 3600)
    long.update(epoch=12, elapsed=3 * 3600, epochs=90)
    console.print(long)
    assert_fits(console.export_text())


def test_a_warning_every_run_would_repeat_is_said_once():
    from runner.report import Reporter

    console = Console(width=80, record=True)
    reporter = Reporter(console)
    for _ in range(3):
        reporter.warn_once("[yellow]MLPerf log[/]: it leaves out the submission keys not set")
    assert console.export_text().count("MLPerf log") == 1


def test_every_command_that_reads_results_has_json():
    from runner.cli import parser

    commands = {"ls": [], "show": ["RUN"], "leaderboard": [], "compare": ["R"], "audit": ["B", "--replay"],
                "verify": ["B"], "drift": [], "reproduce": ["E"], "reinfer": ["E"]}
    top = parser()
    for name, args in commands.items():
        assert top.parse_args([name, *args, "--json"]).json is True, name
    for fmt, args in {"dawnbench": ["R"], "mlperf": ["R", "--out", "x"], "image": ["E"]}.items():
        assert top.parse_args(["export", fmt, *args, "--json"]).json is True, fmt
