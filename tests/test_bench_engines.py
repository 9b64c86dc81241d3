"""``runner bench engines``: its pieces on one engine (Charliecloud, no daemon) with tiny
settings. No timing is asserted: the figures exist, are ordered, and the bench leaves no
container behind; an engine the host lacks is a line saying why, not a crash."""

from __future__ import annotations

import json
import os

import pytest

from runner.bench.engines import engine_names, spread
from runner.cli import main
from runner.errors import UserError

pytestmark = pytest.mark.docker  # a real engine: Charliecloud's, on the shared base image


def _owned_bench_containers() -> list:
    from runner.engine.kinds import ENGINES, implementation

    kind = ENGINES["charliecloud"]
    engine = implementation(kind).open(kind)
    return [c for c in engine.owned() if "bench" in c.name]


def test_freezes_on_charliecloud_are_timed_and_the_container_is_gone(capsys, monkeypatch):
    monkeypatch.delenv("RUNNER_ENGINE", raising=False)
    before = len(_owned_bench_containers())
    assert main(["bench", "engines", "--engines", "charliecloud", "--skip-build", "--skip-reproduce",
                 "--freezes", "3", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (row,) = report["engines"]
    assert row["engine"] == "charliecloud" and row["available"], row
    assert "cold_build" not in row and "reproduce_warm" not in row  # skipped, not measured
    for part in ("freeze", "freeze_call", "thaw"):
        figure = row["freeze"][part]
        assert figure["n"] == 3
        assert 0 < figure["p50_ms"] <= figure["p90_ms"] <= figure["max_ms"], figure
    # Confirmed paused only after the freeze was requested and done.
    assert row["freeze"]["freeze"]["max_ms"] >= row["freeze"]["freeze_call"]["p50_ms"]
    assert "RUNNER_ENGINE" not in os.environ  # the engine chosen for the bench only
    assert len(_owned_bench_containers()) == before


def test_an_engine_this_host_lacks_is_one_line_saying_why(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")
    monkeypatch.setattr("runner.engine.charliecloud.CH_RUN", "/nonexistent/ch-run")
    assert main(["bench", "engines", "--engines", "charliecloud", "--skip-build", "--skip-reproduce",
                 "--freezes", "1"]) == 0
    out = capsys.readouterr().out
    assert "charliecloud: not available: Charliecloud is not installed (/nonexistent/ch-run is missing)" in out


def test_engine_names_are_checked_before_anything_runs():
    assert engine_names(" Docker,charliecloud,docker ") == ["docker", "charliecloud"]
    with pytest.raises(UserError, match="no engine the runner knows: rkt"):
        engine_names("docker,rkt")


def test_spread_is_median_nearest_rank_p90_and_max_in_ms():
    figure = spread([i / 1000 for i in range(10, 0, -1)])  # 1..10 ms, unordered
    assert figure == {"n": 10, "p50_ms": pytest.approx(5.5), "p90_ms": pytest.approx(9.0),
                      "max_ms": pytest.approx(10.0)}
