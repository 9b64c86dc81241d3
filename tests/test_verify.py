"""``runner verify``: a fresh bundle passes every check; each tampering fails and is named.

Tamperings that leave the signature intact are caught by the integrity checks. The ones
that re-hash and re-sign with the *trusted* key show the semantic checks catching what a
signature cannot: a publisher signing a claim its own files contradict.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import shutil
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml
from securesystemslib.signer import CryptoSigner
from synthetic_result import add_plan, honest_plan, make_result_folder, stage_mnist_stand_in

from runner.bundle import make_bundle, pack
from runner.digests import sha256_file
from runner.initial_weights import redraw
from runner.run.init_weights import write_init
from runner.bundle.filelist import ENVELOPE, SIGNER_KEY
from runner.bundle.signing import read_envelope, sign_statement, write_envelope
from runner.cli import main
from runner.entry_build.cyclonedx import FILE as CYCLONEDX_FILE, cyclonedx_document
from runner.entry_build.lockfile import parse_lock
from runner.errors import UserError
from runner.fingerprint import capture_host
from runner.keys import public_key_dict
from runner.score.evaluations import load_predictions
from runner.verify import CHECK_NAMES, Auditor, verify_bundle


@dataclass
class Setup:
    pristine: Path
    trusted: CryptoSigner
    untrusted: CryptoSigner
    auditor: Auditor


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RUNNER_HOME", str(home))  # the auditor's staged data lives here
        staged = stage_mnist_stand_in(home)
        trusted = CryptoSigner.generate_ed25519()
        folder = make_result_folder(
            tmp_path_factory.mktemp("results") / "20261122T010203Z-s0-abc123", staged, capture_host()
        )
        make_bundle(folder, trusted)
        yield Setup(folder, trusted, CryptoSigner.generate_ed25519(), Auditor(trusted_keys=[trusted.public_key]))


@pytest.fixture
def bundle(setup, tmp_path) -> Path:
    copy = tmp_path / setup.pristine.name
    shutil.copytree(setup.pristine, copy)
    return copy


def test_fresh_bundle_passes_every_check(setup, bundle):
    report = verify_bundle(bundle, setup.auditor)
    assert [c.name for c in report.checks] == CHECK_NAMES
    assert report.ok, [(c.name, c.detail) for c in report.checks if not c.ok]


def test_packed_bundle_passes_every_check(setup, bundle, tmp_path):
    report = verify_bundle(pack(bundle, tmp_path / "b.tar.gz"), setup.auditor)
    assert report.ok, [(c.name, c.detail) for c in report.checks if not c.ok]


# -- tamperings ------------------------------------------------------------------------

def _edit_json(path: Path, edit: Callable[[dict], None]) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def _envelope_dict(folder: Path) -> dict:
    return json.loads((folder / ENVELOPE).read_text())


def _resign(folder: Path, s: Setup) -> None:
    """Re-hash and re-sign with the trusted key: the publisher signs the tampered folder."""
    make_bundle(folder, s.trusted)


def edit_result_tta(folder, s):
    _edit_json(folder / "result.json", lambda r: r["training"].update(tta_seconds=r["training"]["tta_seconds"] * 0.5))


def edit_result_tta_resigned(folder, s):
    edit_result_tta(folder, s)
    _resign(folder, s)


def edit_curve(folder, s):
    path = folder / "curve.tsv"
    path.write_text(path.read_text().replace("99.50", "99.90"))


def edit_log(folder, s):
    with open(folder / "logs" / "train.log", "a") as fh:
        fh.write('  :::MLLOG {"key": "eval_accuracy", "value": 0.999}\n')


def edit_model(folder, s):
    path = folder / "output" / "model" / "weights.pt"
    data = bytearray(path.read_bytes())
    data[100] ^= 0xFF
    path.write_bytes(bytes(data))


def redraw_init_for_another_seed_resigned(folder, s):
    """The publisher swaps the recorded start for one drawn from another seed (one the run
    did not start from) and re-signs: the recorded seed no longer is the run's."""
    data = json.loads((folder / "init" / "init.json").read_text())
    tensors, _ = redraw(data)
    write_init(folder / "init", tensors, data["seed"] + 1, data["framework"])
    _edit_json(folder / "result.json", lambda r: r["initial_weights"].update(
        record_sha256=sha256_file(folder / "init" / "init.json"),
        values_sha256=json.loads((folder / "init" / "init.json").read_text())["sha256"]))
    _resign(folder, s)


def ship_final_model_resigned(folder, s):
    """The final model's tensors replaced by a network unrelated to the run's start (one trained
    elsewhere), its descent left as recorded, re-signed."""
    sensitivity = json.loads((folder / "result.json").read_text())["training"]["model_origin"]["sensitivity"]
    dump = folder / next(r["weights"]["index"] for r in sensitivity if r["of"] == "final").removesuffix("/weights.json")
    for k, t in enumerate(json.loads((dump / "weights.json").read_text())["tensors"]):
        np.save(dump / "weights" / f"{k}.npy", np.random.default_rng(k).normal(0, 0.1, t["shape"]).astype(np.float32))
    _resign(folder, s)


def add_file(folder, s):
    (folder / "evaluations" / "0" / "best.npy").write_bytes(b"\x93NUMPY")


def add_file_under_bundle(folder, s):
    (folder / "bundle" / "extra.json").write_text("{}")


def remove_file(folder, s):
    (folder / "sbom.json").unlink()


def change_signature_bytes(folder, s):
    env = _envelope_dict(folder)
    sig = bytearray(base64.b64decode(env["signatures"][0]["sig"]))
    sig[0] ^= 0x01
    env["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
    (folder / ENVELOPE).write_text(json.dumps(env))


def change_payload_type(folder, s):
    env = _envelope_dict(folder)
    env["payloadType"] = "application/json"
    (folder / ENVELOPE).write_text(json.dumps(env))


def change_payload_type_resigned(folder, s):
    envelope = read_envelope(folder / ENVELOPE)
    envelope.payload_type = "application/json"
    envelope.signatures = {}
    envelope.sign(s.trusted)
    write_envelope(folder / ENVELOPE, envelope)


def _sign_as(folder: Path, statement: dict, signer: CryptoSigner) -> None:
    write_envelope(folder / ENVELOPE, sign_statement(statement, signer))
    (folder / SIGNER_KEY).write_text(json.dumps(public_key_dict(signer.public_key)))


def sign_with_untrusted_key(folder, s):
    _sign_as(folder, json.loads(read_envelope(folder / ENVELOPE).payload), s.untrusted)


def resign_modified_statement_untrusted(folder, s):
    statement = json.loads(read_envelope(folder / ENVELOPE).payload)
    statement["predicate"]["training"]["tta_seconds"] = 1.0
    _sign_as(folder, statement, s.untrusted)


def edit_statement_keep_signature(folder, s):
    env = _envelope_dict(folder)
    statement = json.loads(base64.b64decode(env["payload"]))
    statement["predicate"]["cost"]["training_usd"] = 0.0
    env["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    (folder / ENVELOPE).write_text(json.dumps(env))


def edit_statement_resigned(folder, s):
    statement = json.loads(read_envelope(folder / ENVELOPE).payload)
    statement["predicate"]["inference"]["torch"]["latency_ms"]["mean"] /= 2
    _sign_as(folder, statement, s.trusted)


def change_data_digest_resigned(folder, s):
    _edit_json(folder / "result.json", lambda r: r["data"].update(digest="sha256:" + "9" * 64))
    _resign(folder, s)


def reorder_events_resigned(folder, s):
    path = folder / "events.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    lines[3], lines[4] = lines[4], lines[3]  # eval_freeze <-> eval_thaw of the first evaluation
    path.write_text("".join(lines))
    _resign(folder, s)


def flip_prediction_resigned(folder, s):
    # One more wrong answer in the first evaluation (not the crossing): only the scores move.
    path = folder / "evaluations" / "0" / "clean.npy"
    preds = np.load(path)
    preds[0] = (preds[0] + 1) % 10
    np.save(path, preds)
    _resign(folder, s)


def flip_inference_prediction_resigned(folder, s):
    path = folder / "inference" / "torch" / "predictions.npy"
    preds = np.load(path)
    preds[:5] = (preds[:5] + 1) % 10
    np.save(path, preds)
    _resign(folder, s)


def drop_prediction_rows_resigned(folder, s):
    path = folder / "evaluations" / "2" / "clean.npy"
    np.save(path, np.load(path)[:-10])
    _resign(folder, s)


def _edit_events(folder: Path, edit) -> None:
    path = folder / "events.jsonl"
    events = [json.loads(line) for line in path.read_text().splitlines()]
    edit(events)
    path.write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in events))


def _runner_events(events, key):
    return [e for e in events if e["origin"] == "runner" and e["key"] == key]


def move_launch_stamp_resigned(folder, s):
    # A later clock start: TTA would shrink by a second.
    _edit_events(folder, lambda evs: _runner_events(evs, "launch")[0].update(t=1.15))
    _resign(folder, s)


def widen_frozen_window_resigned(folder, s):
    # An earlier freeze of the crossing evaluation: more excluded time.
    _edit_events(folder, lambda evs: _runner_events(evs, "eval_freeze")[1].update(t=5.0))
    _resign(folder, s)


def edit_evaluation_record_resigned(folder, s):
    _edit_json(folder / "result.json", lambda r: r["training"]["evaluations"][1].update(stop=5.0))
    _resign(folder, s)


def edit_checkpoint_digest_resigned(folder, s):
    def edit(evs):
        _runner_events(evs, "eval_thaw")[1]["metadata"]["checkpoint_sha256"] = "a" * 64

    _edit_events(folder, edit)
    _edit_json(folder / "result.json", lambda r: r["training"]["evaluations"][1].update(checkpoint_sha256="a" * 64))
    _resign(folder, s)


def swap_crossing_checkpoint_resigned(folder, s):
    (folder / "checkpoints" / "1.pt").write_bytes(b"another model")
    _resign(folder, s)


def claim_conforming_despite_probe_resigned(folder, s):
    path = folder / "evaluations" / "1" / "probe.npy"
    np.save(path, (np.load(path) + 1) % 10)  # the probe collapses: recalled answers
    _resign(folder, s)


def hide_foreign_tensor_resigned(folder, s):
    """The evaluator recorded a tensor not in the checkpoint; the result still claims conforming."""
    def add(record):
        record["foreign"] = [{"name": "model.hidden.weight", "shape": [10, 784], "dtype": "float32", "bytes": 31360}]
        record["foreign_count"], record["foreign_bytes"] = 1, 31360

    _edit_json(folder / "evaluations" / "1" / "provenance.json", add)
    _resign(folder, s)


def claim_insensitive_model_conforming_resigned(folder, s):
    """With its checkpoint permuted the model still scores: its knowledge is not the checkpoint's."""
    np.save(folder / "evaluations" / "3" / "clean.npy", np.load(folder / "evaluations" / "1" / "clean.npy"))
    _resign(folder, s)


def edit_sensitivity_score_resigned(folder, s):
    _edit_json(folder / "result.json",
               lambda r: r["training"]["model_origin"]["sensitivity"][0].update(score=0.05))
    _resign(folder, s)


def drop_final_model_evaluation_resigned(folder, s):
    """The backends timed a final model the runner never evaluated: nothing shows the timed
    model is the one trained (its evaluation failed, or was never asked for)."""
    _edit_json(folder / "result.json", lambda r: r["training"].update(
        final_model={k: v for k, v in r["training"]["final_model"].items() if k in ("index", "weights", "sha256")}
        | {"problem": "ValueError: the builder refused"}))
    _resign(folder, s)


def raise_builder_limit_resigned(folder, s):
    _edit_json(folder / "result.json",
               lambda r: r["training"]["model_origin"]["builder_seconds"].update(limit=3600))
    _resign(folder, s)


def slow_builder_resigned(folder, s):
    def slow(events):
        for e in _runner_events(events, "eval_thaw"):
            e["metadata"]["builder_seconds"] = 45.0

    _edit_events(folder, slow)
    _resign(folder, s)


def slow_prediction_resigned(folder, s):
    """The crossing evaluation predicted for a minute: the model trained inside its forward pass."""
    def slow(events):
        _runner_events(events, "eval_thaw")[1]["metadata"]["predict_seconds"] = 60.0

    _edit_events(folder, slow)
    _resign(folder, s)


def cross_without_training_resigned(folder, s):
    """The crossing came after half a CPU-second of training (a shipped network written at
    once), the evidence recorded as the runner would have, the result still claiming conforming."""
    from runner.score.training_evidence import training_evidence

    def idle(events):
        for freeze in _runner_events(events, "eval_freeze"):
            freeze["metadata"]["cpu_seconds"] = 0.5

    _edit_events(folder, idle)
    r = json.loads((folder / "result.json").read_text())
    scored = [SimpleNamespace(**{"probe_items": None, **e, "cpu_seconds": 0.5, "predict_cpu_seconds": 0.7,
                                 "gpu_work_seconds": None}) for e in r["training"]["evaluations"]]
    evidence = training_evidence(scored, r["training"]["crossing"], 60000, 10000)[0]
    _edit_json(folder / "result.json", lambda r: r["training"].update(evidence=evidence))
    _resign(folder, s)


def test_a_crossing_without_evidence_of_training_is_named_with_both_figures(setup, bundle):
    cross_without_training_resigned(bundle, setup)
    detail = verify_bundle(bundle, setup.auditor).get("model-origin").detail
    assert "class 4 (no evidence of training)" in detail and "0.50 CPU-seconds" in detail, detail


def test_an_edited_evidence_ratio_is_named(setup, bundle):
    _edit_json(bundle / "result.json", lambda r: r["training"]["evidence"].update(ratio=99.0))
    _resign(bundle, setup)
    detail = verify_bundle(bundle, setup.auditor).get("model-origin").detail
    assert "training.evidence.ratio: claimed 99, recomputed 7.619" in detail, detail


def _with_information(folder, model: str):
    """The bundle with an entry folder and the information record of ``model.py``'s honest
    counterpart: what the tampering below claims."""
    from runner.entry_build.context import entry_files
    from runner.entry_build.information import LockedWheel, measure_entry

    numpy = "89cd468399cfd2504718f0ba50e410dca55a170b61a02ad92bb18c8a65186e93"  # on the reviewed allow-list
    entry = folder / "entry"
    entry.mkdir(exist_ok=True)
    (entry / "entry.yaml").write_text("name: x\nlock: requirements.lock\n")
    (entry / "requirements.lock").write_text(f"numpy==2.4.6 --hash=sha256:{numpy}\n")
    (entry / "model.py").write_text("def build_model():\n    return None\n")
    report = measure_entry(entry, entry_files(entry), entry / "requirements.lock")
    report.wheels = [LockedWheel("numpy==2.4.6", numpy, True)]
    (entry / "model.py").write_text(model)
    (folder / "image-audit.json").write_text(json.dumps({"information": report.to_dict()}))
    _edit_json(folder / "result.json", lambda r: r.update(image_audit={"information": report.summary()}))


def understate_information_resigned(folder, s):
    """A network written as words in model.py, the record of a one-line model.py."""
    import random

    words = "the of and to in is it that was for on are with as his they".split()
    rng = random.Random(0)
    _with_information(folder, '"""' + " ".join(rng.choice(words) for _ in range(60_000)) + '"""\n')
    _resign(folder, s)


def test_an_honest_information_record_passes_and_is_shown_per_file(setup, bundle):
    _with_information(bundle, "def build_model():\n    return None\n")
    _resign(bundle, setup)
    report = verify_bundle(bundle, setup.auditor)
    assert report.ok, [(c.name, c.detail) for c in report.checks if not c.ok]
    detail = report.get("information").detail
    assert "of a budget of 32768 (default)" in detail and "model.py" in detail and "largest literal" in detail
    assert "every locked wheel on the reviewed allow-list (1)" in detail


def test_a_result_without_an_information_record_passes_saying_so(setup, bundle):
    assert "predates the information budget" in verify_bundle(bundle, setup.auditor).get("information").detail


def claim_later_crossing_resigned(folder, s):
    _edit_json(folder / "result.json", lambda r: r["training"].update(crossing=2))
    _resign(folder, s)


def claim_lower_threshold_resigned(folder, s):
    _edit_json(folder / "result.json", lambda r: r["task"].update(threshold=0.9))
    _resign(folder, s)


def edit_latency_resigned(folder, s):
    def halve(r):
        r["inference"]["torch"]["latency_ms"]["mean"] /= 2

    _edit_json(folder / "result.json", halve)
    _resign(folder, s)


def edit_latencies_file_resigned(folder, s):
    path = folder / "inference" / "torch" / "latencies_ns.npy"
    np.save(path, np.load(path) // 2)
    _resign(folder, s)


def change_fingerprint_resigned(folder, s):
    _edit_json(folder / "fingerprint.json", lambda f: f["cpu"].update(architecture="aarch64"))
    _resign(folder, s)


def change_price_resigned(folder, s):
    path = folder / "profile.yaml"
    profile = yaml.safe_load(path.read_text())
    profile["price"]["usd_per_hour"] = 0.0101
    path.write_text(yaml.safe_dump(profile))
    _resign(folder, s)


def _with_plan(folder: Path, plan: dict, s: Setup) -> None:
    add_plan(folder, plan)
    _resign(folder, s)


def _with_cyclonedx(folder: Path, s: Setup, edit: Callable[[dict], None] | None = None, lock: bool = False) -> None:
    """The CycloneDX SBOM as reproduce writes it (with the entry's lock copied in when ``lock``),
    edited if asked, signed."""
    if lock:
        text = "torch==2.13.0+cpu \\\n    --hash=sha256:" + "ab" * 32 + "\n"
        (folder / "entry").mkdir(exist_ok=True)
        (folder / "entry" / "requirements.lock").write_text(text)
        _edit_json(folder / "result.json", lambda r: r["entry"]["digests"].update(
            lock=hashlib.sha256(text.encode()).hexdigest()))
    sbom, r = json.loads((folder / "sbom.json").read_text()), json.loads((folder / "result.json").read_text())
    pins = parse_lock(folder / "entry" / "requirements.lock") if lock else None
    document = cyclonedx_document(sbom, pins, r["image"]["id"], r["image"]["tag"], r["toolkit"]["version"])
    if edit:
        edit(document)
    (folder / CYCLONEDX_FILE).write_text(json.dumps(document, indent=2) + "\n")
    _resign(folder, s)


def edit_cyclonedx_resigned(folder, s):
    """A CycloneDX SBOM that shows scanners another torch than the image holds, signed."""
    _with_cyclonedx(folder, s, lambda d: d["components"][0].update(version="2.99.0"))


def edit_plan_resigned(folder, s):
    """The issue's edited plan, signed: seed 7, /etc and the signing keys as data, 200 GB and
    64 CPUs, the host's network."""
    plan = honest_plan(folder)
    plan.update(seed=7, seeds=[7], network="host", limits={**plan["limits"], "cpus": 64.0, "memory": "200g"})
    plan["data"].update(train_dir="/etc", eval_dir="/root/.cache/runner/keys")
    _with_plan(folder, plan, s)


def drop_recorded_plan_resigned(folder, s):
    """A result of the current format that records its plan, signed without it."""
    _with_plan(folder, honest_plan(folder), s)
    (folder / "plan.json").unlink()
    _resign(folder, s)


def claim_another_keys_ledger_resigned(folder, s):
    """A place in another key's ledger (one whose count of the entry's runs is smaller)."""
    place = {"key_id": s.untrusted.public_key.keyid, "index": 0, "previous": "0" * 64, "entry_runs": 1}
    _edit_json(folder / "result.json", lambda r: r.update(ledger=place))
    _resign(folder, s)


def claim_fewer_runs_than_the_index_allows_resigned(folder, s):
    place = {"key_id": s.trusted.public_key.keyid, "index": 0, "previous": "ab" * 32, "entry_runs": 1}
    _edit_json(folder / "result.json", lambda r: r.update(ledger=place))
    _resign(folder, s)


def _retar(folder: Path, extra: tarfile.TarInfo, data: bytes | None = None) -> Path:
    archive = pack(folder, folder.with_name("bundle.tar.gz"))
    out = folder.with_name("evil.tar.gz")
    with tarfile.open(archive) as src, tarfile.open(out, "w:gz", format=tarfile.GNU_FORMAT) as dst:
        for m in src.getmembers():
            dst.addfile(m, src.extractfile(m))
        dst.addfile(extra, io.BytesIO(data) if data is not None else None)
    return out


def tar_path_traversal(folder, s):
    info = tarfile.TarInfo(f"{folder.name}/../../etc/evil")
    info.size = 4
    return _retar(folder, info, b"evil")


def tar_symlink_member(folder, s):
    info = tarfile.TarInfo(f"{folder.name}/output/passwd")
    info.type = tarfile.SYMTYPE
    info.linkname = "/etc/passwd"
    return _retar(folder, info)


TAMPERINGS = [
    (redraw_init_for_another_seed_resigned, "initial-weights"),
    (ship_final_model_resigned, "initial-weights"),
    (edit_result_tta, "file-digests"),
    (edit_result_tta_resigned, "tta"),
    (edit_curve, "file-digests"),
    (edit_log, "file-digests"),
    (edit_model, "file-digests"),
    (add_file, "file-digests"),
    (add_file_under_bundle, "file-digests"),
    (remove_file, "file-digests"),
    (change_signature_bytes, "signature"),
    (change_payload_type, "signature"),
    (change_payload_type_resigned, "payload-type"),
    (sign_with_untrusted_key, "trusted-key"),
    (resign_modified_statement_untrusted, "trusted-key"),
    (edit_statement_keep_signature, "signature"),
    (edit_statement_resigned, "statement-matches-result"),
    (claim_another_keys_ledger_resigned, "ledger"),
    (claim_fewer_runs_than_the_index_allows_resigned, "ledger"),
    (edit_plan_resigned, "plan"),
    (drop_recorded_plan_resigned, "plan"),
    (change_data_digest_resigned, "data-digest"),
    (drop_prediction_rows_resigned, "eval-set-complete"),
    (flip_prediction_resigned, "scores"),
    (flip_inference_prediction_resigned, "scores"),
    (reorder_events_resigned, "events-order"),
    (move_launch_stamp_resigned, "tta"),
    (widen_frozen_window_resigned, "events-order"),
    (edit_evaluation_record_resigned, "events-order"),
    (edit_checkpoint_digest_resigned, "checkpoints"),
    (swap_crossing_checkpoint_resigned, "checkpoints"),
    (claim_conforming_despite_probe_resigned, "probe"),
    (hide_foreign_tensor_resigned, "model-origin"),
    (claim_insensitive_model_conforming_resigned, "model-origin"),
    (edit_sensitivity_score_resigned, "model-origin"),
    (raise_builder_limit_resigned, "model-origin"),
    (drop_final_model_evaluation_resigned, "model-origin"),
    (slow_builder_resigned, "model-origin"),
    (slow_prediction_resigned, "model-origin"),
    (cross_without_training_resigned, "model-origin"),
    (understate_information_resigned, "information"),
    (edit_cyclonedx_resigned, "sbom"),
    (claim_later_crossing_resigned, "first-crossing"),
    (claim_lower_threshold_resigned, "first-crossing"),
    (edit_latency_resigned, "inference-gate"),
    (edit_latencies_file_resigned, "inference-gate"),
    (change_fingerprint_resigned, "hardware-profile"),
    (change_price_resigned, "cost"),
    (tar_path_traversal, "bundle-safe-to-open"),
    (tar_symlink_member, "bundle-safe-to-open"),
]


@pytest.mark.parametrize("tamper, failing", TAMPERINGS, ids=[t.__name__ for t, _ in TAMPERINGS])
def test_tampering_fails_and_names_the_check(setup, bundle, tamper, failing):
    target = tamper(bundle, setup) or bundle
    report = verify_bundle(target, setup.auditor)
    assert not report.ok
    assert report.first_failure == failing, [(c.name, c.detail) for c in report.checks if not c.ok]
    assert report.get(failing).detail  # the verdict says why


def test_tamperings_cover_every_check():
    assert {failing for _, failing in TAMPERINGS} == set(CHECK_NAMES)


# -- what the verdicts say ----------------------------------------------------------------

def test_price_change_names_both_prices(setup, bundle):
    change_price_resigned(bundle, setup)
    detail = verify_bundle(bundle, setup.auditor).get("cost").detail
    assert "$0.0101/h" in detail and "$0.1008/h" in detail


def test_file_digests_name_missing_added_and_changed(setup, bundle):
    remove_file(bundle, setup)
    add_file(bundle, setup)
    edit_curve(bundle, setup)
    detail = verify_bundle(bundle, setup.auditor).get("file-digests").detail
    assert "changed: curve.tsv" in detail
    assert "missing: sbom.json" in detail
    assert "added: evaluations/0/best.npy" in detail


def test_unsigned_bundle_fails_signature_but_semantics_still_run(setup, bundle):
    make_bundle(bundle, signer=None)
    report = verify_bundle(bundle, setup.auditor)
    assert report.first_failure == "signature"
    assert "unsigned" in report.get("signature").detail
    assert report.get("scores").ok and report.get("tta").ok and report.get("cost").ok
    assert "UNSIGNED manifest" in report.get("file-digests").detail


def test_a_plan_that_describes_its_result_passes_and_an_edited_one_is_named(setup, bundle):
    """The plan row: an honest plan passes; the edited one fails naming each of its edits."""
    _with_plan(bundle, honest_plan(bundle), setup)
    report = verify_bundle(bundle, setup.auditor)
    assert report.ok, [(c.name, c.detail) for c in report.checks if not c.ok]
    assert "plan.json describes its result" in report.get("plan").detail
    edit_plan_resigned(bundle, setup)
    detail = verify_bundle(bundle, setup.auditor).get("plan").detail
    for said in ("seed 7", "'/root/.cache/runner/keys' is not a staged set's eval/", "64.0 CPUs and 200g memory",
                 "network 'host'"):
        assert said in detail, detail


def test_a_cyclonedx_sbom_rebuilt_from_the_bundle_passes_with_its_lock_hashes(setup, bundle):
    _with_cyclonedx(bundle, setup, lock=True)
    report = verify_bundle(bundle, setup.auditor)
    assert report.ok, [(c.name, c.detail) for c in report.checks if not c.ok]
    assert report.get("sbom").detail == "CycloneDX 1.6: 1 components, 1 with their sha256 from the lock"
    edit_cyclonedx_resigned(bundle, setup)
    detail = verify_bundle(bundle, setup.auditor).get("sbom").detail
    assert "components[0].version" in detail, detail


def test_a_bundle_from_before_the_cyclonedx_sbom_passes_the_sbom_row(setup, bundle):
    assert verify_bundle(bundle, setup.auditor).get("sbom").detail.startswith("no sbom.cdx.json")


def test_a_result_of_the_older_format_has_no_plan_to_check(setup, bundle):
    assert verify_bundle(bundle, setup.auditor).get("plan").detail.startswith("no plan recorded")


def test_no_trusted_keys_fails_trust(setup, bundle):
    report = verify_bundle(bundle, Auditor(trusted_keys=[]))
    assert report.failed == ["trusted-key"]


def test_non_conforming_hardware_is_reported_not_passed(setup, bundle):
    change_fingerprint_resigned(bundle, setup)
    def own_up(r):
        r["conforming"] = False
        r["nonconforming_reasons"] = ["hardware mismatch: cpu.architecture: expected x86_64, found aarch64"]
        r["hardware"].update(matched=False, allowed_mismatch=True,
                             mismatches=["cpu.architecture: expected x86_64, found aarch64"])
    _edit_json(bundle / "result.json", own_up)
    _resign(bundle, setup)
    report = verify_bundle(bundle, setup.auditor)
    assert report.failed == ["hardware-profile"]
    assert "NON-CONFORMING" in report.get("hardware-profile").detail


def test_a_claimed_section_of_the_wrong_kind_fails_its_checks_by_name(setup, bundle):
    """A result.json whose sections are not objects (no runner writes one, so it cannot be
    bundled: the digests fail too) fails each check that reads them, naming the section, not
    with an exception's text."""
    def misshape(r):
        r["inference"] = ["a list, not {backend: record}"]
        r["cost"] = "free"
    _edit_json(bundle / "result.json", misshape)
    report = verify_bundle(bundle, setup.auditor)
    for name, section in (("scores", "inference"), ("inference-gate", "inference"), ("cost", "cost")):
        assert report.get(name).detail.startswith(f"result.json's {section} is not an object"), report.get(name)


def test_question_answers_that_are_not_an_object_are_unreadable(tmp_path):
    """A question task's predictions are {id: answer}: any other JSON is unreadable, as a
    malformed file is (the check reading it fails, naming it)."""
    path = tmp_path / "predictions.json"
    path.write_text('["an answer", "another"]')
    with pytest.raises(ValueError, match="not a JSON object of answers"):
        load_predictions(path)
    path.write_text('{"q1": "an answer"}')
    assert load_predictions(path) == {"q1": "an answer"}


def test_missing_auditor_data_fails_the_data_checks(setup, bundle, tmp_path, monkeypatch):
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path / "empty-home"))
    report = verify_bundle(bundle, setup.auditor)
    assert "data-digest" in report.failed and "scores" in report.failed
    assert "not staged" in report.get("data-digest").detail


# -- the command -------------------------------------------------------------------------

@pytest.fixture
def trusted_key_file(setup, tmp_path) -> Path:
    path = tmp_path / "publisher.pub.json"
    path.write_text(json.dumps(public_key_dict(setup.trusted.public_key)))
    return path


def test_cli_prints_one_line_per_check_and_exits_zero(setup, bundle, trusted_key_file, capsys):
    assert main(["verify", str(bundle), "--trusted-keys", str(trusted_key_file)]) == 0
    out = capsys.readouterr().out
    for name in CHECK_NAMES:
        assert any(line.startswith("✓ " + name) for line in out.splitlines()), name
    assert "verified" in out


def test_cli_json_and_exit_one_on_failure(setup, bundle, trusted_key_file, capsys):
    edit_log(bundle, setup)
    assert main(["verify", str(bundle), "--trusted-keys", str(trusted_key_file), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False
    assert [c["name"] for c in report["checks"] if not c["ok"]] == ["file-digests"]


def test_cli_bad_bundle_path_is_a_user_error(trusted_key_file, tmp_path, capsys):
    code = main(["verify", str(tmp_path / "nope"), "--trusted-keys", str(trusted_key_file)])
    assert code == UserError.exit_code
    assert "no bundle at" in capsys.readouterr().err


def test_a_non_conforming_result_is_noted_even_when_every_check_passes(setup, bundle, capsys, trusted_key_file):
    from runner.verify.verdict import judge_report

    def smoke(r):
        r["conforming"] = False
        r["nonconforming_reasons"] = ["entry used an unpinned wheel"]

    _edit_json(bundle / "result.json", smoke)
    _resign(bundle, setup)
    report = verify_bundle(bundle, setup.auditor)
    assert report.ok
    assert judge_report(report).reasons == ("non-conforming: entry used an unpinned wheel",)
    assert main(["verify", str(bundle), "--trusted-keys", str(trusted_key_file)]) == 3  # verified, does not count
    out = capsys.readouterr().out
    assert "the run does not count" in out and "  - non-conforming: entry used an unpinned wheel" in out
