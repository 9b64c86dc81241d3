"""A terminal that fits (issue 50, item 5): ``runner verify`` at 80 columns, one line per check
with its details indented under it (never back to column 0); paths and commands never folded
(``show``, ``ls``, ``verify``, ``config``: a line of their own, whole, so a copy is the path);
the MLPerf submitter warning where it matters only (``runner config``, not every run). The real
CLI on a real signed run folder (``tests/synthetic_result.py``) under a folder whose path is
longer than the terminal is wide."""

from __future__ import annotations

import io
import shlex
import shutil
from types import SimpleNamespace

import pytest
from rich.cells import cell_len
from rich.console import Console
from rich.text import Text
from synthetic_result import edit_result, make_result_folder, new_signer, stage_mnist_stand_in
from tests.hostile.hostile_helpers import run_cli

from runner.bundle import make_bundle
from runner.fingerprint import capture_host
from runner.report import Reporter, reporting
from runner.results.record import Result
from runner.terminal import MISSING, Column, compact_table, hanging, plain_table, text

ENTRY = "mnist-cnn-cpu"
RUN = "20261122T010203Z-s0-aaaaaa"
MARKS = ("✓ ", "✗ ", "- ")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A signed run whose folder's path is over 80 columns, and its trusted key."""
    root = tmp_path_factory.mktemp("fit")
    deep = root / "a-results-folder-with-a-long-name" / "and-another-level-below-it" / "results"
    signer, keys = new_signer(root)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RUNNER_HOME", str(root / "home"))
        staged = stage_mnist_stand_in(root / "home")
        folder = make_result_folder(deep / ENTRY / RUN, staged, capture_host())
        edit_result(folder, conforming=True, nonconforming_reasons=[])
        make_bundle(folder, signer)
    assert len(str(folder)) > 80
    return SimpleNamespace(folder=folder, results=deep, keys=keys, home=root / "home")


@pytest.fixture
def cli(run, capsys, monkeypatch):
    monkeypatch.setenv("RUNNER_HOME", str(run.home))
    monkeypatch.setenv("COLUMNS", "80")

    def call(*argv: str) -> tuple[int, list[str]]:
        code, out, err = run_cli(capsys, *argv)
        assert code in (0, 3), err
        return code, [line.rstrip() for line in out.splitlines()]
    return call


def fits(lines: list[str], *whole: str) -> None:
    """Every line within 80 columns but those that are one of ``whole`` (a path or a command,
    each of which must be a line of its own, whole)."""
    for item in whole:
        assert item in [line.strip() for line in lines], f"{item!r} not a line of its own"
    wide = [line for line in lines if cell_len(line) > 80 and line.strip() not in whole]
    assert wide == []


def test_verify_gives_each_check_a_line_and_indents_its_details_under_it(run, cli):
    code, lines = cli("verify", str(run.folder), "--trusted-keys", str(run.keys))
    assert code == 0
    checks = [line for line in lines if line.startswith(MARKS)]
    assert len(checks) >= 20
    details = [line for line in lines if not line.startswith(MARKS)][:-1]  # the last: the verdict
    assert all(line.startswith("    ") for line in details), "a detail wrapped back to column 0"
    # 37 lines for 23 checks; 43 before, each name padded to the longest and details wrapping to column 0
    assert len(lines) <= len(checks) * 5 // 3, f"{len(lines)} lines for {len(checks)} checks"
    fits(lines)


def test_a_detail_with_a_word_longer_than_the_line_keeps_it_whole():
    url = "https://example.org/" + "x" * 90
    lines = hanging("✓ payload-type      ", f"in-toto Statement v1, predicate {url} (and more)", 80, 4)
    assert lines[0] == "✓ payload-type      in-toto Statement v1, predicate"
    assert lines[1] == "    " + url and lines[2] == "    (and more)"


def test_show_prints_the_folder_and_the_check_command_whole(run, cli):
    _, lines = cli("show", "s0-aaaaaa", "--results", str(run.results), "--trusted-keys", str(run.keys))
    command = f"runner verify {shlex.quote(str(run.folder))}"
    fits(lines, str(run.folder), command)
    curve = lines.index("time to accuracy")
    assert len(lines) - curve < 40


def test_ls_of_an_empty_folder_prints_its_path_whole(run, cli, tmp_path):
    empty = tmp_path / ("x" * 90)
    _, lines = cli("ls", "--results", str(empty))
    fits(lines, str(empty))


def test_verify_of_several_bundles_names_each_whole(run, cli):
    code, lines = cli("verify", str(run.folder), str(run.folder), "--trusted-keys", str(run.keys))
    assert lines.count(str(run.folder)) == 2
    fits(lines, str(run.folder))


def test_the_mlperf_warning_is_in_config_and_not_in_a_run(run, cli, monkeypatch, tmp_path):
    from runner.reproduce import mlperf_log  # lazy: heavy (the pipeline)

    assert not (run.home / "config.yaml").exists()  # no setting made in this home
    _, lines = cli("config", "show")
    assert any(line.startswith("MLPerf submission: not set: org") for line in lines)
    fits(lines, 'runner config set mlperf.org "VALUE"')
    console = Console(width=80, record=True)
    with reporting(Reporter(console)):
        copy = shutil.copytree(run.folder, tmp_path / RUN)  # the log is written into the folder
        mlperf_log(SimpleNamespace(result_dir=copy), Result.read(copy))
    said = console.export_text()
    assert "mlperf" in said and "submission keys" not in said and "config set" not in said


@pytest.mark.parametrize("width", [80, 120])
def test_ls_tables_drawn_in_one_pass_are_the_tables_rich_draws(width):
    """``plain_table`` (what ``runner ls`` prints, fast) and ``compact_table`` (rich's table)
    print the same characters; past the width, plain_table leaves it to rich."""
    columns = [Column("run"), Column("status"), Column("TTA s", number=True), Column("verdict")]
    rows = [[text("s0-aaaaaa"), "complete", "10.12", Text("counts")],
            [text("s12-bbbbbb*"), "incomplete", MISSING, Text("no", style="red")],
            [text("s3-c\x1b[31m"), "running", "7.00", Text("verified")]]

    def printed(renderable) -> str:
        console = Console(width=width, record=True, file=io.StringIO())
        console.print(renderable)
        return console.export_text()

    fast = plain_table("[bold]mnist[/] (3 runs)", columns, rows, width)
    assert fast is not None
    assert printed(fast) == printed(compact_table("[bold]mnist[/] (3 runs)", columns, rows, hide_empty=False))
    assert plain_table("t", columns, [[text("x" * width), "a", "1", Text("b")]], width) is None
