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


# -- the output pump: a container's output stream as stamped lines --------------------------
def _pumped(tmp_path, chunks, on_line=None):
    from runner.engine.containers import _OutputPump

    seen = []
    ticks = iter(range(100))
    pump = _OutputPump(on_line or (lambda line, t: seen.append((line, t))), lambda: float(next(ticks)))
    log = tmp_path / "logs" / "out.log"
    log.parent.mkdir()
    pump.run(iter(chunks), log)
    return seen, log.read_text().splitlines(), pump.failures


def test_lines_split_across_chunks_are_whole_and_stamped_when_their_end_arrives(tmp_path):
    seen, log, failures = _pumped(tmp_path, [b"one\ntw", b"o\r\nthr", b"ee"])
    # Stamped when its chunk arrives; the last, with no newline, when the stream ends.
    assert seen == [("one", 0.0), ("two", 1.0), ("three", 3.0)]
    assert log == ["[     0.000] one", "[     1.000] two", "[     3.000] three"]
    assert failures == []


def test_an_over_long_line_is_cut_and_says_how_much(tmp_path, monkeypatch):
    from runner.engine import containers

    monkeypatch.setattr(containers, "MAX_LINE_BYTES", 4)
    seen, _, _ = _pumped(tmp_path, [b"abcdef", b"gh\nok\n", b"xyzzy"])
    assert [line for line, _ in seen] == ["abcd [... 4 more bytes cut by the runner]", "ok",
                                          "xyzz [... 1 more bytes cut by the runner]"]


def test_a_consumers_error_does_not_stop_the_reading_and_the_first_is_kept(tmp_path):
    seen = []

    def consumer(line, t):
        seen.append(line)
        raise ValueError(f"bad {line}")

    _, log, failures = _pumped(tmp_path, [b"a\nb\n"], consumer)
    assert seen == ["a", "b"] and len(log) == 2
    assert [str(f) for f in failures] == ["bad a"]


def test_a_failing_stream_is_a_failure_after_the_lines_it_gave(tmp_path):
    def stream():
        yield b"a\n"
        raise OSError("connection reset")

    from runner.engine.containers import _OutputPump

    log = tmp_path / "out.log"
    pump = _OutputPump(lambda line, t: None, lambda: 0.0)
    pump.run(stream(), log)
    assert log.read_text() == "[     0.000] a\n"
    assert [str(f) for f in pump.failures] == ["connection reset"]
