"""The typed result and the published JSON Schema describe the same result.json."""

from __future__ import annotations

import json
from dataclasses import fields

import jsonschema
import pytest

from runner.results import RESULT_SCHEMA
from runner.results.record import Cost, Result, Training
from tests.synthetic_result import make_result_folder, stage_mnist_stand_in


def _names(cls) -> set[str]:
    return {f.name for f in fields(cls)}


def test_every_field_of_the_type_is_in_the_schema_and_back():
    props = RESULT_SCHEMA["properties"]
    assert _names(Result) == set(props)
    assert set(RESULT_SCHEMA["required"]) <= _names(Result)
    assert _names(Training) == set(props["training"]["properties"])
    assert set(props["cost"]["required"]) <= _names(Cost)


@pytest.fixture
def folder(tmp_path):
    from runner.fingerprint import capture_host

    staged = stage_mnist_stand_in(tmp_path / "home")
    return make_result_folder(tmp_path / "20261122T010203Z-s0-abc123", staged, capture_host(None))


def test_a_result_reads_back_to_the_same_json(folder):
    raw = json.loads((folder / "result.json").read_text())
    result = Result.read(folder)
    assert result.to_dict() == raw
    jsonschema.Draft202012Validator(RESULT_SCHEMA).validate(result.to_dict())
    assert result.tta_seconds == raw["training"]["tta_seconds"]


def test_the_last_write_is_one_write_whose_timings_end_with_it(folder, monkeypatch):
    """``Result.write_last``: result.json written once, its timings ending in "writing" (the
    record's rendering), the file and the record in memory alike."""
    from runner.results import record
    from runner.timings import Timings

    writes = []
    real = record.write_json
    monkeypatch.setattr(record, "write_json", lambda path, data: (writes.append(path), real(path, data)))
    result, clock = Result.read(folder), Timings()
    clock.add("training", 2.0)
    result.write_last(folder, clock)
    assert writes == [folder / "result.json"]
    timings = json.loads((folder / "result.json").read_text())["timings"]
    assert [p["name"] for p in timings["phases"]] == ["training", "writing"] and timings == result.timings
    assert timings["total_seconds"] == pytest.approx(sum(p["seconds"] for p in timings["phases"]), abs=1e-3)
    assert Result.read(folder).to_dict() == result.to_dict()


def test_a_malformed_result_is_a_value_error_not_a_crash():
    with pytest.raises(ValueError):
        Result.from_dict({"run_id": "x"})
    with pytest.raises(ValueError):
        Result.from_dict([1, 2])
