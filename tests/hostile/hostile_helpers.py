"""Shared pieces of the hostile-input catalogue: run the real CLI and check that a failure
is one line, with no traceback, and that nothing was left behind."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from runner.cli import main
from runner.results.layout import entry_runs

TESTS = Path(__file__).resolve().parent.parent
PROBE = TESTS / "entries" / "contract-probe"
DEFAULT_ENTRY = TESTS.parent / "entries" / "mnist-cnn-cpu"


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """``runner ARGV`` in-process: (exit code, stdout, stderr). argparse exits count too."""
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 2
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, out: str, err: str, *needles: str, exit_code: int = 2) -> str:
    """Exit ``exit_code``, stderr exactly one ``... error: ...`` line naming every needle."""
    assert code == exit_code, (code, out, err)
    assert "Traceback" not in out + err, err
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1, err
    assert "error:" in lines[0], err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def probe_entry(tmp_path: Path, mode: str) -> Path:
    """The contract-probe test entry, running ``probe.py MODE``."""
    folder = tmp_path / "contract-probe"
    shutil.copytree(PROBE, folder)
    manifest = yaml.safe_load((folder / "entry.yaml").read_text())
    manifest["train"]["command"] = ["python3", "/entry/probe.py", mode]
    (folder / "entry.yaml").write_text(yaml.safe_dump(manifest))
    return folder


def edit_manifest(folder: Path, **fields) -> Path:
    manifest = yaml.safe_load((folder / "entry.yaml").read_text())
    for dotted, value in fields.items():
        *parents, last = dotted.split("__")
        node = manifest
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value
    (folder / "entry.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    return folder


def result_of(results: Path, entry: str = "contract-probe") -> dict:
    (folder,) = entry_runs(results, entry)
    return json.loads((folder / "result.json").read_text()) | {"_folder": str(folder)}


def journalled_run(results: Path, entry: str = "contract-probe") -> dict:
    """A run in progress, or what a SIGKILLed runner leaves of one: a folder with no
    result.json (it is written once, when the run is finished) and the run's record as far as
    it went, journalled beside the runner's marker of the run (outside the folder, for the
    next start to recover)."""
    from runner import paths

    (logs,) = results.glob(f"{entry}/**/logs")
    folder = logs.parent
    assert not (folder / "result.json").exists()
    marker = json.loads((paths.home() / "active-runs" / f"{folder.name}.json").read_text())
    return marker["record"] | {"_folder": str(folder)}


def event_keys(result: dict) -> list[str]:
    lines = Path(result["_folder"], "events.jsonl").read_text().splitlines()
    return [json.loads(line)["key"] for line in lines]


def no_results(results: Path) -> bool:
    return not results.exists() or not any(results.rglob("result.json"))


@pytest.fixture
def results(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "results"
    monkeypatch.setenv("RUNNER_RESULTS", str(folder))
    return folder


def signed_result(tmp_path_factory, run_id: str, signer, *, with_plan: bool = False):
    """A signed synthetic result folder (``tests/synthetic_result.py``) made by the project's
    own functions, signed by ``signer``; with ``with_plan``, the run's plan.json too. Returns
    (folder, the RUNNER_HOME it was staged in)."""
    from synthetic_result import add_plan, honest_plan, make_result_folder, stage_mnist_stand_in

    from runner.bundle import make_bundle
    from runner.fingerprint import capture_host

    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RUNNER_HOME", str(home))
        staged = stage_mnist_stand_in(home)
        folder = make_result_folder(tmp_path_factory.mktemp("results") / run_id, staged, capture_host())
        if with_plan:
            add_plan(folder, honest_plan(folder))
        make_bundle(folder, signer)
    return folder, home

