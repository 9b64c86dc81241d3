"""Is the host calm enough for a conforming run? Asked before the build and again before each
run's training, so a busy host is named at once instead of after a run it made
non-conforming (the check after training, ``runner.run.contention``, still decides).

The measure is the contention check's own: ``ContentionSampler`` on the run's CPUs for a
quarter of a second (``SAMPLE_S``), with its classes (the runner, its children and the engine serving
it are not "other") and its thresholds (``RUNNER_MAX_OTHER_RUNNABLE``, ``RUNNER_MAX_STEAL``).
Before training none of the run's containers exists yet, so none is counted as the run's:
nothing of the entry can hide in the measure.

A measure can be begun before it is needed (``begin``): ``runner reproduce`` begins one as
it starts, and the runner's own preparation (the engine asked, the host's fingerprint, the
data and the image found) goes on while it samples; a build waits for it before fetching
anything, and a run whose image is built already waits for it before its training. Either
way no container of the run exists yet. A container the preparation runs from the entry's
image (the model's tensors listed, when no earlier run kept them) counts as another
tenant's: it can only make the host look busier, never calmer.

A busy host is said with its figures and the other tenants' processes seen runnable most
often, then waited for: a live line on a terminal, a plain line at least every
``PLAIN_EVERY_S`` otherwise, until a measure is under
the thresholds or the time-out (``--calm-timeout``, ``RUNNER_CALM_TIMEOUT``) has passed,
which stops the command with a one-line error. With ``--allow-contended``
(``RUNNER_ALLOW_CONTENDED=1``) the runner says so and goes on.
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

from rich.markup import escape

from runner.errors import UserError
from runner.report import reporter
from runner.run.contention import PROC, ContentionSampler, ContentionSummary, thresholds

# One measure: what a calm host pays, mostly hidden behind the runner's preparation. A tenant
# that keeps a CPU busy is runnable in every sample, so five samples find it as surely as
# ten; a tenant busy only now and then may fall between them, and the check after training,
# which samples the whole run, still decides. A sample reads /proc once (about 2 ms, 67
# processes, on a 2-core Zen 4): a twentieth of a CPU at this pace.
SAMPLE_S = 0.25
INTERVAL_S = 0.05
MIN_SAMPLES = 4  # a loaded host starves the sampler too: it waits for these, up to 5 x SAMPLE_S
# A calm measure this recent stands for the next check on the same CPUs (a build of seconds), and
# a measure begun this recently is taken by the next check (measured twice, and each waited for,
# the two checks had been 5.8 % of the runner's cost against a plain `docker run`).
FRESH_S = 5.0
_calm_at: dict[str | None, tuple[float, HostLoad]] = {}
_begun: dict[str | None, Measure] = {}  # begun and not yet taken, by CPUs
POLL_S = 2.0  # between measures while waiting
PLAIN_EVERY_S = 30.0  # without a terminal, a line at least this often
DEFAULT_TIMEOUT_S = 600.0
TIMEOUT_ENV = "RUNNER_CALM_TIMEOUT"
ALLOW_ENV = "RUNNER_ALLOW_CONTENDED"
BUSIEST = 3  # processes named


def timeout_s(asked: float | None) -> float:
    """The time-out: ``--calm-timeout``, else ``RUNNER_CALM_TIMEOUT``, else 10 minutes."""
    if asked is not None:
        return asked
    text = os.environ.get(TIMEOUT_ENV, "")
    try:
        value = float(text) if text else DEFAULT_TIMEOUT_S
    except ValueError:
        raise UserError(f"{TIMEOUT_ENV}={text[:40]!r} is not a number of seconds",
                        f"set {TIMEOUT_ENV} to seconds (0: never wait), or unset it") from None
    return max(0.0, value)


def allowed(asked: bool) -> bool:
    """``--allow-contended``, or ``RUNNER_ALLOW_CONTENDED=1`` (tests, CI on shared machines)."""
    return asked or os.environ.get(ALLOW_ENV, "") not in ("", "0")


@dataclass(frozen=True)
class Busy:
    """Another tenant's process seen runnable on the run's CPUs."""

    pid: int
    name: str
    share: float  # of the samples it was runnable in
    container: str | None

    def __str__(self) -> str:
        inside = f" in container {self.container[:12]}" if self.container else ""
        return f"pid {self.pid} {self.name}{inside} ({self.share:.0%})"


@dataclass(frozen=True)
class HostLoad:
    cpuset: str | None
    summary: ContentionSummary
    busiest: tuple[Busy, ...]

    def problem(self) -> str | None:
        """Why a run now would be non-conforming (the contention check's words), or None."""
        return self.summary.problem()

    def figures(self) -> str:
        max_steal, max_runnable = thresholds()
        where = f"CPUs {self.cpuset}" if self.cpuset else "every CPU"
        return (f"{self.summary.other_runnable_per_cpu:.2f} other runnable tasks per CPU on {where} "
                f"(limit {max_runnable:g}), steal {self.summary.steal_fraction:.1%} (limit {max_steal:.0%})")

    def describe(self) -> str:
        named = ", ".join(map(str, self.busiest))
        return self.figures() + (f"; the busiest: {named}" if named else "")


class Measure:
    """One measure of ``cpuset``, sampling from its creation; it ends by itself after
    ``sample_s`` (and ``MIN_SAMPLES`` samples, up to 5 x ``sample_s``), whether or not anybody
    waits for it: ``result`` waits for the rest, then gives the load it saw."""

    def __init__(self, cpuset: str | None, sample_s: float = SAMPLE_S):
        self.cpuset = cpuset
        self.sample_s = sample_s
        self.started = time.monotonic()
        self._sampler = ContentionSampler(cpuset, interval_s=INTERVAL_S).start()
        self._done = threading.Event()
        self._load: HostLoad | None = None
        self._failed: BaseException | None = None  # raised to whoever takes the result
        self.ended: float | None = None  # monotonic: when its last sample was taken
        threading.Thread(target=self._finish, name="runner-host-load", daemon=True).start()

    def _finish(self) -> None:
        sampler, started = self._sampler, self.started
        try:
            time.sleep(self.sample_s)
            while sampler.samples_taken < MIN_SAMPLES and time.monotonic() - started < 5 * self.sample_s:
                time.sleep(INTERVAL_S / 2)
            summary = sampler.stop()
            busiest = tuple(Busy(pid, _name(pid), n / max(1, summary.samples), sampler.counter.container(pid))
                            for pid, n in sampler.others.most_common(BUSIEST))
            self._load = HostLoad(self.cpuset, summary, busiest)
        except BaseException as exc:  # noqa: BLE001 - not lost in this thread: ``result`` raises it
            self._failed = exc
        finally:
            self.ended = time.monotonic()
            self._done.set()  # whatever happened: nobody waits forever

    def result(self) -> HostLoad:
        self._done.wait()
        if self._load is None:
            raise self._failed or RuntimeError("the host's load could not be measured")
        return self._load


def measure(cpuset: str | None, sample_s: float = SAMPLE_S) -> HostLoad:
    """The host's load on ``cpuset`` over about ``sample_s``, as the contention check sees it."""
    return Measure(cpuset, sample_s).result()


def begin(cpuset: str | None) -> Measure:
    """Begin a measure of ``cpuset`` now: the next ``wait_for_calm`` of the same CPUs takes it
    (waiting for the rest of it) instead of measuring then, unless it ended over ``FRESH_S`` before."""
    begun = _begun[cpuset] = Measure(cpuset)
    return begun


def _taken(cpuset: str | None, meanwhile: Callable[[], object]) -> HostLoad:
    """The measure ``begin`` began for ``cpuset`` (once), unless it ended too long ago to stand
    for now, else a new one; ``meanwhile()`` runs while the measure samples."""
    begun = _begun.pop(cpuset, None)
    if begun is not None and (begun.ended is None or time.monotonic() - begun.ended <= FRESH_S):
        meanwhile()
        return begun.result()
    now = Measure(cpuset)
    meanwhile()
    return now.result()


def _name(pid: int) -> str:
    try:
        return (PROC / str(pid) / "comm").read_text().strip() or "?"
    except OSError:
        return "(gone)"


def wait_for_calm(cpuset: str | None, before: str, allow: bool = False, timeout: float | None = None,
                  fresh_s: float = 0.0, meanwhile: Callable[[], object] = lambda: None) -> HostLoad:
    """Return once the host is calm on ``cpuset`` (at once when it is: one measure), or with
    ``allow`` at once, having said it is busy; past the time-out, a ``UserError``.
    ``before`` says what waits ("before the build"); with ``fresh_s``, a calm measure of the
    same CPUs that ended at most that long ago stands for this one (nothing is measured).
    ``meanwhile()``: the runner's own work, done while the first measure samples (the runner's
    work is never another tenant's load)."""
    if fresh_s > 0 and cpuset in _calm_at and time.monotonic() - _calm_at[cpuset][0] <= fresh_s:
        return _calm_at[cpuset][1]
    load = _taken(cpuset, meanwhile)
    if load.problem() is None:
        _calm_at[cpuset] = (time.monotonic(), load)
        return load
    say = reporter().print
    if allowed(allow):
        say(f"[yellow]the host is busy {before}[/]: {escape(load.describe())}; going on (--allow-contended): "
            "the run is marked non-conforming if it stays busy", highlight=False)
        return load
    limit = timeout_s(timeout)
    say(f"[yellow]the host is busy {before}[/]: {escape(load.describe())}", highlight=False)
    if limit > 0:
        say(f"waiting up to {limit:g} s for it to calm down (stop what is named; --allow-contended goes on now, "
            "marked non-conforming; --calm-timeout SECONDS waits longer)", highlight=False)
    started = time.monotonic()
    with _waiting(limit) as show:
        while (waited := time.monotonic() - started) < limit:
            time.sleep(min(POLL_S, limit - waited))
            load = measure(cpuset)
            waited = time.monotonic() - started
            if load.problem() is None:
                say(f"the host is calm after {waited:.0f} s ({escape(load.figures())}); going on", highlight=False)
                _calm_at[cpuset] = (time.monotonic(), load)
                return load
            show(load, waited)
    raise UserError(f"the host stayed busy {before} for {limit:g} s: {load.describe()}",
                    "stop the processes named, or pass --allow-contended (the run is marked non-conforming), "
                    f"or wait longer with --calm-timeout SECONDS ({TIMEOUT_ENV})")


@contextmanager
def _waiting(limit: float) -> Iterator[Callable[[HostLoad, float], None]]:
    """What the wait shows: a live line on a terminal; otherwise a plain line at least every
    ``PLAIN_EVERY_S``."""
    rep = reporter()
    live = rep.console.is_terminal and not rep.quiet

    def text(load: HostLoad, waited: float, named: bool = True) -> str:
        what = load.describe() if named else load.figures()  # a live line fits one line
        return f"waiting for a calm host: {escape(what)}; {min(waited, limit):.0f} s of {limit:g} s"

    if live:
        with rep.console.status("waiting for a calm host") as status:
            yield lambda load, waited: status.update(text(load, waited, named=False))
        return
    last = [0.0]

    def plain(load: HostLoad, waited: float) -> None:
        if waited - last[0] >= PLAIN_EVERY_S:
            last[0] = waited
            rep.print(text(load, waited), highlight=False)

    yield plain

