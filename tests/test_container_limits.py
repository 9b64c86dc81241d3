import os

from runner.engine.containers import ContainerOutcome, cpu_limits


def test_whole_cores_are_pinned_and_fractions_are_a_quota():
    assert cpu_limits(1) == {"cpuset_cpus": "0-0"}
    assert cpu_limits(0.5) == {"nano_cpus": 500_000_000}
    assert cpu_limits(None) == {}
    # More cores than the host has cannot be pinned: fall back to a quota the engine checks.
    many = (os.cpu_count() or 1) + 1
    assert cpu_limits(many) == {"nano_cpus": many * 1_000_000_000}


def test_outcome_reasons():
    assert ContainerOutcome(0, False, False, 1.0).reason() is None
    assert ContainerOutcome(None, False, True, 1.0).reason() == "interrupted"
    assert ContainerOutcome(None, True, False, 61.2).reason() == "timed out after 61 s"
    assert ContainerOutcome(3, False, False, 1.0).reason() == "container exited with code 3"
    assert ContainerOutcome(0, False, False, 1.0).ok
    assert not ContainerOutcome(0, True, False, 1.0).ok
