"""DAWNBench's format: real published files read into claims, a result exported and read
back, malformed files named with what is wrong, and SQuAD's F1 written as a fraction."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest
from synthetic_result import edit_result, make_result_folder, new_signer, stage_mnist_stand_in

from runner.bundle import make_bundle
from runner.cli import main
from runner.dawnbench import export_dawnbench, import_dawnbench, load_claims
from runner.dawnbench.claims import CLAIMS_DIR
from runner.dawnbench.importer import INFERENCE_JSON, TRAIN_JSON, TSV
from runner.errors import UserError
from runner.fingerprint import capture_host
from runner.keys.trust import trusted_keys
from runner.score.curve import curve_rows
from runner.score.evaluations import ScoredEvaluation
from runner.score.tta import Evaluation, Timeline
from runner.tasks import get_task

FIXTURES = Path(__file__).parent / "data" / "dawnbench"


@pytest.fixture(scope="module")
def imported():
    return import_dawnbench(FIXTURES)


def claim(report, task, kind, name):
    (found,) = [c for c in report.claims if (c.task, c.kind, c.name) == (task, kind, name)]
    return found


def test_fixtures_hold_every_published_variant():
    """The fixtures stay worth testing: each odd variant of the real repository is in them."""
    raw = {p.relative_to(FIXTURES).as_posix(): p.read_bytes() for p in FIXTURES.rglob("*") if p.suffix in (".json", ".tsv")}
    first = {name: data.decode("utf-8-sig").splitlines()[0].split("\t") for name, data in raw.items() if name.endswith(".tsv")}
    assert raw["CIFAR10/train/KRes34_1GTX1080Ti_pytorch.tsv"].startswith(b"\xef\xbb\xbf")
    assert sum(b"\r\n" in d for n, d in raw.items() if n.endswith(".tsv")) >= 3
    assert sum(b"\r\n" in d for n, d in raw.items() if n.endswith(".json")) >= 3
    assert [h[:2] for h in first.values()].count(["hours", "epoch"]) >= 2
    assert ["epoch", "f1Score", "hours"] in first.values()
    assert any(b"\n\n" in d.replace(b"\r\n", b"\n") for n, d in raw.items() if n.endswith(".tsv"))
    assert any(b" \t" in d or b"\t " in d for d in raw.values())
    jsons = {n: json.loads(d.decode("utf-8-sig")) for n, d in raw.items() if n.endswith(".json")}
    assert any("costPerHour" in j and j["costPerHour"] is None for j in jsons.values())
    assert any("cost" in j and j["cost"] is None for j in jsons.values())
    assert any(len(j["timestamp"]) < 10 for j in jsons.values())
    assert any(isinstance(j.get("misc"), str) for j in jsons.values())
    assert {"commitHash", "usedBlacklist", "evalBatchSize", "momentum", "optimizer"} <= {k for j in jsons.values() for k in j}
    assert len(raw) == 52


def test_every_fixture_is_read(imported):
    assert imported.failures == []
    assert dict(imported.read) == {TRAIN_JSON: 20, TSV: 20, INFERENCE_JSON: 12}
    assert {c.task for c in imported.claims} == {"cifar10", "imagenet", "squad-v1.1"}
    train = [c for c in imported.claims if c.kind == "train"]
    assert all(c.tta_hours is not None and c.curve for c in train)  # DAWNBench accepted only runs that crossed


def test_known_training_values(imported):
    page = claim(imported, "cifar10", "train", "davidcpage_resnet9_1v100-ec2_pytorch")
    assert page.tta_hours == 0.02056706  # epoch 24, 94.08%: the leaderboard's 74 s, $0.06
    assert page.cost_per_hour_usd == 3.06 and page.cost_usd == 0.02056706 * 3.06
    assert (page.team, page.model, page.date) == ("David Page, myrtle.ai", "Custom ResNet 9", "2018-11-06")
    apple = claim(imported, "cifar10", "train", "apple_resnet9_8v100_pytorch")
    assert apple.tta_hours == 0.0026191027585688666 and apple.cost_usd is None  # no costPerHour
    kres = claim(imported, "cifar10", "train", "KRes34_1GTX1080Ti_pytorch")  # BOM + CRLF
    assert kres.curve[0].epoch == 1 and set(kres.curve[0].scores) == {"top1Accuracy"}
    ali = claim(imported, "imagenet", "train", "alibabacloud_resnet50_gn6e_16_machine_tensorflow")
    assert round(ali.tta_seconds) == 158  # the published record: 2 min 38 s
    tensorpack = claim(imported, "imagenet", "train", "ppwwyyxx_resnet152_8P100-DGX1_tensorpack")  # hours epoch ...
    assert tensorpack.curve[0].hours < tensorpack.curve[1].hours and tensorpack.curve[0].epoch < tensorpack.curve[1].epoch
    drqa = claim(imported, "squad-v1.1", "train", "dawn_drqa_1k80-ec2")  # epoch f1Score hours, padded cells
    first = next(p for p in drqa.curve if p.scores["f1Score"] >= 0.75)
    assert drqa.tta_hours == first.hours and drqa.accuracy == first.scores["f1Score"] < 1
    assert claim(imported, "cifar10", "train", "dawn_resnet164_nb_1p100-dawn_tensorflow_part2").curve[0].epoch == 1.00096


def test_known_inference_values(imported):
    huawei = claim(imported, "cifar10", "inference", "HuaweiCloud_resnet8_modelarts_aibox")
    assert huawei.latency_ms == 0.1345 and huawei.cost_per_10k_usd is None and huawei.accuracy == 94.2 / 100
    resnet56 = claim(imported, "cifar10", "inference", "dawn_resnet56_1k80-ec2_pytorch")
    assert resnet56.cost_per_10k_usd == 2.4460776946225e-06 * 10_000  # the file's cost is per image
    assert claim(imported, "cifar10", "inference", "laurentmazare_resnet9_1p100_pytorch").cost_per_10k_usd is None
    assert claim(imported, "imagenet", "inference", "HaifanData_resnet50_1GTX1080Ti_tensorflow").date == "2019-07-22"
    ffn = claim(imported, "squad-v1.1", "inference", "dawn_fastfusionnet-1080ti")
    assert ffn.accuracy == 82.52085997573373 / 100 and "percent" in ffn.notes[0]
    bidaf = claim(imported, "squad-v1.1", "inference", "dawn_bidaf_1k80-ec2_tensorflow")
    assert bidaf.accuracy == 0.7533331513 and bidaf.latency_ms == 705.9


def test_a_single_file_or_its_curve_is_read(tmp_path):
    (one,) = import_dawnbench(FIXTURES / "SQuAD" / "train" / "dawn_drqa_1k80-ec2.tsv").claims
    assert (one.task, one.kind, one.name) == ("squad-v1.1", "train", "dawn_drqa_1k80-ec2")
    flat = tmp_path / "flat"  # outside any task folder: --task says which
    flat.mkdir()
    for suffix in (".json", ".tsv"):
        shutil.copy(FIXTURES / "CIFAR10" / "train" / f"davidcpage_resnet9_1v100-ec2_pytorch{suffix}", flat)
    (failure,) = import_dawnbench(flat).failures
    assert "cannot tell the task" in str(failure) and "pass --task" in str(failure)
    (claim,) = import_dawnbench(flat, "cifar10").claims
    assert claim.task == "cifar10" and claim.tta_hours == 0.02056706


GOOD_TRAIN = {"version": "v1.0", "author": "A", "authorEmail": "a@b", "framework": "f", "model": "m",
              "hardware": "h", "costPerHour": 1.0, "timestamp": "2018-01-02", "misc": {}}


CURVE = "epoch\thours\ttop1Accuracy\n1\t0.1\t95\n"


@pytest.mark.parametrize("json_text, tsv_text, named, expected", [
    ("{not json", None, "s.json", "not valid JSON (line 1"),
    ("[1, 2]", None, "s.json", "a JSON list, not an object"),
    (json.dumps({**GOOD_TRAIN, "model": ""}), CURVE, "s.json", "field 'model' must be a non-empty string"),
    (json.dumps({**GOOD_TRAIN, "timestamp": "02/01/2018"}), CURVE, "s.json", "timestamp '02/01/2018' is not a date"),
    (json.dumps({**GOOD_TRAIN, "costPerHour": "3 USD"}), CURVE, "s.json", "field 'costPerHour' is '3 USD', not a number"),
    (json.dumps(GOOD_TRAIN), None, "s.json", "a training file without its curve s.tsv"),
    (json.dumps(GOOD_TRAIN), "epoch\thours\ttop5Accuracy\n1\t0.1\t95\n", "s.tsv", "header 'epoch hours top5Accuracy' lacks column(s) top1Accuracy"),
    (json.dumps(GOOD_TRAIN), "epoch\thours\ttop1Accuracy\n1\t0.1\tn/a\n", "s.tsv", "line 2: top1Accuracy is 'n/a', not a number"),
    (json.dumps(GOOD_TRAIN), "epoch\thours\ttop1Accuracy\n1\t0.1\n", "s.tsv", "line 2: 2 cells for 3 columns"),
    (json.dumps(GOOD_TRAIN), "epoch\thours\ttop1Accuracy\n", "s.tsv", "no rows after the header"),
])
def test_a_malformed_file_is_named_with_what_is_wrong(tmp_path, json_text, tsv_text, named, expected):
    folder = tmp_path / "CIFAR10" / "train"
    folder.mkdir(parents=True)
    (folder / "s.json").write_text(json_text)
    if tsv_text is not None:
        (folder / "s.tsv").write_text(tsv_text)
    (failure,) = import_dawnbench(tmp_path).failures
    message = str(failure)
    assert message.startswith(f"{folder / named}: {expected}") and "\n" not in message


def test_an_inference_file_needs_latency_or_cost(tmp_path):
    folder = tmp_path / "ImageNet" / "inference"
    folder.mkdir(parents=True)
    data = {k: v for k, v in GOOD_TRAIN.items() if k != "costPerHour"}
    (folder / "i.json").write_text(json.dumps({**data, "latency": "fast"}))
    (failure,) = import_dawnbench(tmp_path).failures
    assert f"{folder / 'i.json'}: field 'latency' is 'fast', not a number" in str(failure)


def test_cli_import_saves_claims_and_names_each_bad_file(tmp_path, capsys):
    source = tmp_path / "entries"
    shutil.copytree(FIXTURES, source)
    results = tmp_path / "results"
    assert main(["import", "dawnbench", str(source), "--results", str(results)]) == 0
    assert len(load_claims(results)) == 52 - 20
    assert "read 20 TSV, 12 inference JSON, 20 train JSON" in capsys.readouterr().out
    bad = source / "SQuAD" / "train" / "broken.json"
    bad.write_text(json.dumps(GOOD_TRAIN))  # no TSV beside it
    shutil.rmtree(results)
    assert main(["import", "dawnbench", str(source), "--results", str(results)]) == 2
    out, err = capsys.readouterr()
    assert f"failed: {bad}: a training file without its curve broken.tsv" in out.replace("\n", "")
    assert err.startswith("runner: error: 1 file(s) could not be read") and err.count("\n") == 1
    assert len(load_claims(results)) == 32  # the good files are kept


# -- export ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def result_folder(tmp_path_factory):
    """A signed run that counts (RUNNER_HOME stays its home: the data verify recomputes with)."""
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RUNNER_HOME", str(home))
        staged = stage_mnist_stand_in(home)
        root = tmp_path_factory.mktemp("results")
        signer, keys = new_signer(root)
        folder = make_result_folder(root / "20261122T010203Z-s0-abc123", staged, capture_host())
        edit_result(folder, conforming=True, nonconforming_reasons=[])
        make_bundle(folder, signer)
        KEYS[:] = [keys, signer]
        yield folder


KEYS: list = []  # the result folder's trusted key file and its signer


def test_export_writes_dawnbench_files_that_import_back(result_folder, tmp_path):
    out = tmp_path / "submission"
    assert main(["export", "dawnbench", str(result_folder), "--out", str(out), "--author", "Jane Doe",
                 "--email", "jane@example.org", "--trusted-keys", str(KEYS[0])]) == 0
    train_json = out / "MNIST" / "train" / "Jane-Doe_small-bn-cnn_cpu-2core-x86_pytorch-2.13.0+cpu.json"
    data = json.loads(train_json.read_text())
    result = json.loads((result_folder / "result.json").read_text())
    assert {"version", "author", "authorEmail", "framework", "model", "hardware", "costPerHour", "timestamp", "misc"} <= set(data)
    assert (data["version"], data["timestamp"], data["costPerHour"]) == ("v1.0", "2026-11-22", result["cost"]["usd_per_hour"])
    tsv = train_json.with_suffix(".tsv").read_text().splitlines()
    assert tsv[0] == "epoch\thours\ttop1Accuracy" and len(tsv) == 1 + len(result["training"]["evaluations"])

    (back,) = [c for c in import_dawnbench(out).claims if c.kind == "train"]
    assert back.task == "mnist" and back.team == "Jane Doe"
    assert back.tta_seconds == pytest.approx(result["training"]["tta_seconds"], abs=0.01)  # curve hours: 6 decimals
    (inference,) = [c for c in import_dawnbench(out).claims if c.kind == "inference"]
    torch = result["inference"]["torch"]
    assert inference.latency_ms == torch["latency_ms"]["mean"]
    assert inference.cost_per_10k_usd == pytest.approx(torch["cost_per_10k_usd"], rel=1e-12)
    assert inference.accuracy == pytest.approx(torch["scores"]["top1"], rel=1e-12)


def test_export_of_a_bundle_matches_its_signed_result(result_folder, tmp_path):
    """A bundle's .tar.gz is read as its folder is."""
    from runner.bundle import pack

    archive = pack(result_folder, tmp_path / "bundle.tar.gz")
    written = export_dawnbench(archive, tmp_path / "out", "runner", trusted_keys=[KEYS[1].public_key])
    with tarfile.open(archive) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/result.json"))
        result = json.load(tar.extractfile(member))
    claims = {c.kind + "/" + c.framework.split()[0]: c for c in import_dawnbench(tmp_path / "out").claims}
    assert len(written) == 2 + len(result["inference"])  # train JSON + TSV, one JSON per gated backend
    train = claims["train/pytorch"]
    assert train.tta_seconds == pytest.approx(result["training"]["tta_seconds"], abs=0.01)
    assert len(train.curve) == len(result["training"]["evaluations"])
    for backend, measured in result["inference"].items():
        assert claims[f"inference/{backend}"].latency_ms == measured["latency_ms"]["mean"]


def test_export_refuses_a_run_that_does_not_count_and_writes_nothing(result_folder, tmp_path):
    """The archived bundle does not count (a lone run, on a contended host; and here, with the
    stand-in data staged, it does not even verify): it is no submission."""
    (archive,) = (Path(__file__).parent.parent / "results" / "archive").glob("*.tar.gz")
    keys = trusted_keys(Path(__file__).parent.parent / "results" / "archive" / "keys")
    with pytest.raises(UserError, match="the run does not count") as err:
        export_dawnbench(archive, tmp_path / "out", "runner", trusted_keys=keys)
    assert "non-conforming" in err.value.problem or "not verified" in err.value.problem
    assert not (tmp_path / "out").exists()
    copy = tmp_path / result_folder.name
    shutil.copytree(result_folder, copy)
    edit_result(copy, training__tta_seconds=1.0)  # edited after signing: not verified
    with pytest.raises(UserError, match="not verified"):
        export_dawnbench(copy, tmp_path / "out", "me", trusted_keys=[KEYS[1].public_key])
    assert not (tmp_path / "out").exists()


def test_export_refuses_a_run_that_never_crossed(result_folder, tmp_path):
    copy = tmp_path / result_folder.name
    shutil.copytree(result_folder, copy)
    shutil.rmtree(copy / "bundle")
    edit_result(copy, training__reached=False, training__tta_seconds=None)
    make_bundle(copy, KEYS[1])
    with pytest.raises(UserError, match="never reached the threshold|does not count"):
        export_dawnbench(copy, tmp_path / "out", "me", trusted_keys=[KEYS[1].public_key])
    assert not (tmp_path / "out").exists()


def test_curve_writes_squad_f1_as_a_fraction_and_accuracies_in_percent():
    line = Timeline(0.0, 30.0, [Evaluation(0, 1, 9.0, 10.0, "p1"), Evaluation(1, 2, 19.0, 20.0, "p2")])
    scored = [ScoredEvaluation(0, 1, 9.0, 10.0, "p1", 10, {"f1": 0.7312}, False),
              ScoredEvaluation(1, 2, 19.0, 20.0, "p2", 10, {"f1": 0.7561}, True)]
    assert curve_rows(get_task("squad-v1.1"), line, scored) == [["1", "0.002500", "0.7312"], ["2", "0.005000", "0.7561"]]
    top1 = [ScoredEvaluation(0, 1, 9.0, 10.0, "p1", 10, {"top1": 0.9412}, True)]
    assert curve_rows(get_task("cifar10"), line, top1) == [["1", "0.002500", "94.12"]]


@pytest.mark.parametrize("argv, message", [
    (["import", "dawnbench", "{tmp}/missing"], "no such file or folder: {tmp}/missing"),
    (["export", "dawnbench", "{tmp}/missing"], "no result at {tmp}/missing"),
    (["export", "dawnbench", "{tmp}"], "{tmp}/result.json does not exist"),
])
def test_cli_errors_are_one_line(tmp_path, capsys, argv, message):
    assert main([a.format(tmp=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"runner: error: {message.format(tmp=tmp_path)}") and err.count("\n") == 1


def test_a_stored_claim_that_is_not_an_object_is_one_line(tmp_path):
    """A file under results/claims/ holding a JSON array (a hand edit, a copied file) is
    refused in one line naming it, not read as a claim."""
    stored = tmp_path / CLAIMS_DIR / "CIFAR10" / "train" / "odd.json"
    stored.parent.mkdir(parents=True)
    stored.write_text("[1, 2]")
    with pytest.raises(UserError, match="odd.json: not a stored claim .ValueError: a JSON list, not an object"):
        load_claims(tmp_path)
