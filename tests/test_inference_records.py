"""``result.json``'s inference records as ``BackendRun``: a record read back writes out as it
was read (an archived result, a field the type does not name), and a malformed entry is
left out as every reader left it out before the type."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.results.inference import RECORD_FIELDS, BackendRun, as_dicts, read_section
from runner.results.record import RESULT_FILE, Result
from runner.results.view import read_record

# The result.json of a bundle archived on 2026-11-22 (before inference energy was measured),
# kept when that bundle left results/archive/ for one of the entry's current code.
ARCHIVED = (Path(__file__).resolve().parent / "data" / "older-results"
            / "mnist-cnn-cpu-20261122T073521Z-s0-460bd7.result.json")


@pytest.fixture
def archived(tmp_path) -> Path:
    """The archived result.json, alone in a folder of its own."""
    folder = tmp_path / ARCHIVED.name.removesuffix(".result.json")
    folder.mkdir()
    (folder / RESULT_FILE).write_bytes(ARCHIVED.read_bytes())
    return folder


def test_the_archived_result_reads_into_typed_records_and_writes_back_the_same(archived, tmp_path):
    raw = json.loads((archived / RESULT_FILE).read_text())
    result = Result.read(archived)
    assert set(result.inference) == set(raw["inference"]) == {"torch", "onnxruntime"}
    for name, run in result.inference.items():
        assert isinstance(run, BackendRun) and run.name == name
        assert run.passed_gate is True and run.gate_reason is None and run.extra == {}
        assert run.count == 10_000 and run.mean_ms == raw["inference"][name]["latency_ms"]["mean"]
        assert run.version == raw["inference"][name]["info"]["version"]
        assert "energy" in run.missing and run.joules_per_10k is None  # archived before inference energy
    assert as_dicts(result.inference) == raw["inference"]
    assert result.to_dict()["inference"] == raw["inference"]
    out = tmp_path / "written"
    out.mkdir()
    result.write(out)
    assert json.loads((out / RESULT_FILE).read_text())["inference"] == raw["inference"]
    # The leaderboard's view shares the records; nothing parses them a second time.
    record = read_record(archived)
    assert record.backends == result.inference
    assert [b.name for b in record.gated_backends()] == sorted(
        raw["inference"], key=lambda b: raw["inference"][b]["latency_ms"]["mean"])


def test_a_field_the_type_does_not_name_round_trips():
    data = {"passed_gate": False, "gate_reason": "too slow", "scores": {"top1": 0.5},
            "tensorrt_engine": {"sha256": "ab" * 32, "layers": [1, 2]}, "name": "not the key"}
    run = BackendRun.from_dict("tensorrt", data)
    assert run.name == "tensorrt" and run.gate_reason == "too slow" and run.score("top1") == 0.5
    assert run.extra == {"tensorrt_engine": {"sha256": "ab" * 32, "layers": [1, 2]}, "name": "not the key"}
    assert run.missing == frozenset(RECORD_FIELDS) - {"passed_gate", "gate_reason", "scores"}
    assert run.to_dict() == data
    written = run.to_dict()
    written["tensorrt_engine"]["layers"].clear()  # a written copy never reaches back into the record
    assert run.extra["tensorrt_engine"]["layers"] == [1, 2]
    # A field set after reading is written; one still unset stays absent.
    run.final_model_disagreement = 0.0
    assert run.to_dict()["final_model_disagreement"] == 0.0 and "energy" not in run.to_dict()


def test_a_malformed_entry_is_left_out_as_the_readers_left_it_out(archived):
    raw = json.loads((archived / RESULT_FILE).read_text())
    raw["inference"]["broken"] = ["not", "a", "record"]
    raw["inference"]["none"] = None
    (archived / RESULT_FILE).write_text(json.dumps(raw))
    result = Result.read(archived)
    assert set(result.inference) == {"torch", "onnxruntime"}
    assert set(read_record(archived).backends) == {"torch", "onnxruntime"}  # as the view skipped them
    # Odd values inside a record are kept as they were, and the figures read around them.
    odd = BackendRun.from_dict("torch", {"passed_gate": "yes", "latency_ms": "fast", "scores": [1], "info": 3})
    assert odd.mean_ms is None and odd.score("top1") is None and odd.version is None
    assert odd.to_dict() == {"passed_gate": "yes", "latency_ms": "fast", "scores": [1], "info": 3}
    with pytest.raises(ValueError, match="inference is not an object"):
        read_section(["torch"])
