"""``run_container``'s ``before_start``: what must start first (the evaluator) is waited for
once the training container is created, never after it starts (real engine, base image)."""

from __future__ import annotations

import pytest

from runner.engine.containers import MANAGED_LABEL, ContainerSpec, run_container
from runner.images import ensure_base

from conftest import CPU_BASE


@pytest.fixture(scope="module")
def base_tag(engine):
    return ensure_base(CPU_BASE, engine).tag


def test_before_start_runs_on_the_created_container_before_it_starts(engine, base_tag, tmp_path):
    order: list[str] = []
    lines: list[str] = []

    def before_start() -> None:
        (created,) = [c for c in engine.owned() if c.labels.get(MANAGED_LABEL) == "start-order-test"]
        order.append(f"before_start:{created.state().status}")

    spec = ContainerSpec(base_tag, ["sh", "-c", "echo ran"], [], timeout_s=60, label="start-order-test")
    outcome = run_container(engine, spec, lambda line, t: lines.append(line), tmp_path / "out.log",
                            on_started=lambda container, clock: order.append("started"), before_start=before_start)
    assert outcome.ok, outcome
    assert order == ["before_start:created", "started"]
    assert lines == ["ran"]


def test_a_before_start_that_is_interrupted_still_removes_the_container(engine, base_tag, tmp_path):
    def before_start() -> None:
        raise KeyboardInterrupt

    spec = ContainerSpec(base_tag, ["sh", "-c", "echo never"], [], timeout_s=60, label="start-order-test")
    outcome = run_container(engine, spec, lambda line, t: None, tmp_path / "out.log", before_start=before_start)
    assert outcome.interrupted and outcome.exit_code is None
    assert not [c for c in engine.owned() if c.labels.get(MANAGED_LABEL) == "start-order-test"]
