"""Atomic staging, staged.json, lookups and synthetic sets."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from runner import data, paths
from runner.data.store import load
from runner.errors import UserError
from runner.staging.stage import Stage, data_digest


@pytest.fixture(autouse=True)
def runner_home(tmp_path, monkeypatch):
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _stage_small(target, value: int, **kw):
    with Stage("mnist", target, source="test", source_digest=None, conforming=False, **kw) as stage:
        stage.save_array("train/images.npy", np.full((2, 1, 28, 28), value), "uint8")
        stage.save_array("train/labels.npy", [value, value], "int64")
        stage.save_array("eval/images.npy", np.zeros((1, 1, 28, 28)), "uint8")
        stage.save_array("labels/eval_labels.npy", [value], "int64")
        stage.counts = {"train": 2, "eval": 1}


def test_staged_set_records_each_file_and_a_combined_digest():
    target = paths.data_dir() / "mnist"
    _stage_small(target, 3)
    record = json.loads((target / "staged.json").read_text())
    assert set(record["files"]) == {
        "train/images.npy",
        "train/labels.npy",
        "eval/images.npy",
        "labels/eval_labels.npy",
    }
    assert record["digest"] == data_digest(record["files"])
    staged = data.staged("mnist")
    assert staged.digest == record["digest"] and not staged.conforming
    assert staged.train_dir == target / "train" and staged.labels == target / "labels"
    assert staged.load_eval_labels().tolist() == [3]
    assert not (target / "eval" / "labels.npy").exists()  # eval inputs carry no labels
    assert (target / "train" / "images.npy").stat().st_mode & 0o222 == 0


def test_same_arrays_give_same_digest(tmp_path):
    _stage_small(tmp_path / "a", 5)
    _stage_small(tmp_path / "b", 5)
    _stage_small(tmp_path / "c", 6)
    assert load(tmp_path / "a").digest == load(tmp_path / "b").digest != load(tmp_path / "c").digest


def test_failed_staging_keeps_the_previous_set_and_leaves_nothing_behind():
    target = paths.data_dir() / "mnist"
    _stage_small(target, 1)
    before = data.staged("mnist").digest
    with pytest.raises(RuntimeError):
        with Stage("mnist", target, source="test", source_digest=None, conforming=False) as stage:
            stage.save_array("train/images.npy", np.ones((2, 1, 28, 28)), "uint8")
            raise RuntimeError("interrupted")
    assert data.staged("mnist").digest == before
    assert [p.name for p in paths.data_dir().iterdir()] == ["mnist"]


def test_restaging_replaces_the_set():
    target = paths.data_dir() / "mnist"
    _stage_small(target, 1)
    _stage_small(target, 2)
    assert data.staged("mnist").load_eval_labels().tolist() == [2]
    assert [p.name for p in paths.data_dir().iterdir()] == ["mnist"]


def test_killed_staging_never_looks_staged_and_is_cleaned_up_later():
    # A real process dies in the middle of staging (after writing an array).
    script = (
        "import os, numpy as np\n"
        "from runner import paths\n"
        "from runner.staging.stage import Stage\n"
        "target = paths.data_dir() / 'mnist'\n"
        "with Stage('mnist', target, source='t', source_digest=None, conforming=False) as s:\n"
        "    s.save_array('train/images.npy', np.zeros((4, 1, 28, 28)), 'uint8')\n"
        "    os._exit(9)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], env=os.environ.copy())
    assert done.returncode == 9
    leftovers = [p for p in paths.data_dir().iterdir() if p.name.startswith(".mnist")]
    assert leftovers, "the dead process' temp folder should still be there"
    with pytest.raises(UserError, match="not staged"):
        data.staged("mnist")
    _stage_small(paths.data_dir() / "mnist", 4)  # the next staging removes the dead one's folder
    assert [p.name for p in paths.data_dir().iterdir()] == ["mnist"]


def test_pinned_digest_mismatch_is_refused_and_nothing_is_staged():
    target = paths.data_dir() / "mnist"
    with pytest.raises(UserError, match="does not match the pinned array"):
        _stage_small(target, 1, pinned={"train/labels.npy": "0" * 64})
    assert not target.exists()


def test_not_staged_error_says_how_to_stage():
    with pytest.raises(UserError) as err:
        data.staged("mnist")
    assert "data set mnist is not staged" in str(err.value) and "runner data prepare mnist" in str(
        err.value
    )
    with pytest.raises(UserError, match="runner data import imagenet"):
        data.staged("imagenet")
    with pytest.raises(UserError, match="unknown task"):
        data.staged("cifar100")


def test_damaged_and_modified_sets_are_detected():
    target = paths.data_dir() / "mnist"
    _stage_small(target, 1)
    images = target / "eval" / "images.npy"
    os.chmod(images, 0o644)
    raw = bytearray(images.read_bytes())
    raw[-1] ^= 0xFF  # same size, different content: only a re-hash sees it
    images.write_bytes(bytes(raw))
    data.staged("mnist")
    with pytest.raises(UserError, match="has changed since staging"):
        data.staged("mnist", verify=True)
    images.write_bytes(bytes(raw[:-10]))
    with pytest.raises(UserError, match="damaged"):
        data.staged("mnist")


def test_prepare_refuses_sets_that_must_be_imported():
    with pytest.raises(UserError, match="runner data import cifar10"):
        data.prepare("cifar10")


def test_synthetic_imagenet_is_a_jpeg_tree_like_the_official_one(tmp_path):
    """ImageNet's smoke data: a training tree of JPEGs in WNID folders (the run contract's
    layout) at a small resolution, and the staged evaluation arrays at the same one."""
    from runner.tasks.imagenet.synthetic import SMOKE_SHAPE

    staged = data.synthetic("imagenet", tmp_path / "imagenet", n_train=6, n_eval=3, seed=1)
    jpegs = sorted(staged.train_dir.rglob("*.JPEG"))
    assert len(jpegs) == 6 and all(p.parent.name.startswith("n") and len(p.parent.name) == 9 for p in jpegs)
    assert all(p.name.startswith(p.parent.name + "_") for p in jpegs)
    assert np.load(staged.eval_dir / "images.npy").shape == (3, *SMOKE_SHAPE)
    assert staged.load_eval_labels().shape == (3,)
    again = data.synthetic("imagenet", tmp_path / "again", n_train=6, n_eval=3, seed=1)
    assert again.digest == staged.digest


@pytest.mark.parametrize("task", ["cifar10", "mnist"])
def test_synthetic_image_sets_have_the_task_shapes(tmp_path, task):
    from runner.tasks import get_task

    spec = get_task(task)
    staged = data.synthetic(task, tmp_path / task, n_train=6, n_eval=3, seed=1)
    assert not staged.conforming and staged.source == "synthetic:seed=1"
    train = np.load(staged.train_dir / "images.npy")
    assert train.shape == (6, *spec.input_shape) and train.dtype == np.uint8
    labels = np.load(staged.train_dir / "labels.npy")
    assert labels.dtype == np.int64 and labels.max() < spec.num_classes
    assert np.load(staged.eval_dir / "images.npy").shape == (3, *spec.input_shape)
    assert staged.load_eval_labels().shape == (3,)
    again = data.synthetic(task, tmp_path / "again", n_train=6, n_eval=3, seed=1)
    assert again.digest == staged.digest


def test_synthetic_squad_has_questions_without_answers_and_answers_apart(tmp_path):
    staged = data.synthetic("squad-v1.1", tmp_path / "squad", n_train=4, n_eval=5, seed=2)
    lines = [json.loads(x) for x in (staged.eval_dir / "examples.jsonl").read_text().splitlines()]
    assert len(lines) == 5 and all(set(x) == {"id", "title", "context", "question"} for x in lines)
    answers = staged.load_eval_labels()
    assert set(answers) == {x["id"] for x in lines}
    for x in lines[1:]:  # an answer is a span of its context, so a reader can score (almost) 1.0
        assert answers[x["id"]][0] in x["context"]
    assert answers[lines[0]["id"]] == ["no such answer"]  # but never a perfect 1.0
    train = json.loads((staged.train_dir / "train-v1.1.json").read_text())
    assert train["version"] == "1.1"
