"""The contention sampler's three classes of runnable tasks: the run's own containers (not
counted), the runner's own work (it, its descendants, the Docker engine serving it:
reported apart, a note at most) and other tenants (the contention). Fake /proc trees for
the exact classification and the per-pid cache; real busy processes for the real /proc."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from runner.results import assemble
from runner.run import contention
from runner.run.contention import OTHER, OWN, RUNNER, ContentionSampler, ContentionSummary, RunnableCounter
from runner.run.guards import GuardVerdict, RunGuards

OWN_ID = "a" * 64
FOREIGN_ID = "b" * 64
ME = 100


# --- a fake /proc ---------------------------------------------------------------------------

def _stat(pid: int, comm: str, state: str, ppid: int, cpu: int, threads: int = 1, start: int = 1000) -> str:
    fields = ["0"] * 50
    fields[0], fields[1], fields[17], fields[19], fields[36] = state, str(ppid), str(threads), str(start), str(cpu)
    return f"{pid} ({comm}) {' '.join(fields)}\n"


def add_proc(proc: Path, pid: int, ppid: int, comm: str = "python3", state: str = "R", cpu: int = 0,
             threads: list[tuple[int, str, int]] = (), container: str | None = None, cmdline: str = "",
             start: int = 1000) -> Path:
    """One process: its leader on ``cpu`` in ``state``; ``threads``: its other (tid, state, cpu)."""
    d = proc / str(pid)
    (d / "task").mkdir(parents=True, exist_ok=True)
    (d / "stat").write_text(_stat(pid, comm, state, ppid, cpu, 1 + len(threads), start))
    for tid, tstate, tcpu in threads:
        (d / "task" / str(tid)).mkdir(exist_ok=True)
        (d / "task" / str(tid) / "stat").write_text(_stat(tid, comm, tstate, ppid, tcpu, 1 + len(threads), start))
    (d / "task" / str(pid)).mkdir(exist_ok=True)
    (d / "task" / str(pid) / "stat").write_text(_stat(pid, comm, state, ppid, cpu, 1 + len(threads), start))
    cgroup = f"0::/system.slice/docker-{container}.scope\n" if container else "0::/user.slice\n"
    (d / "cgroup").write_text(cgroup)
    (d / "cmdline").write_bytes(cmdline.replace(" ", "\0").encode())
    return d


def write_proc_stat(proc: Path, jiffies: int = 0) -> None:
    proc.mkdir(parents=True, exist_ok=True)
    line = f"{jiffies} 0 0 {jiffies} 0 0 0 0 0 0"
    (proc / "stat").write_text(f"cpu  {line}\ncpu0 {line}\ncpu1 {line}\n")


@pytest.fixture
def tree(tmp_path) -> Path:
    """A host where a run floods stdout: the runner (pid 100) and its children, the engine
    copying the output, the run's container, and other tenants."""
    proc = tmp_path / "proc"
    write_proc_stat(proc)
    add_proc(proc, 1, 0, "init", state="S")
    # The runner: leader reading the output, the sampler thread (101), one sleeping thread.
    add_proc(proc, ME, 1, "runner", cpu=0, threads=[(101, "R", 1), (102, "S", 0)])
    add_proc(proc, 200, ME, "python3", cpu=1)  # a child of the runner
    add_proc(proc, 201, 200, "sh", cpu=1)  # and its child
    add_proc(proc, 400, 1, "dockerd", cpu=0, threads=[(401, "R", 1)])
    add_proc(proc, 410, 400, "containerd", cpu=1)
    add_proc(proc, 500, 1, "containerd-shim", cpu=0,
             cmdline=f"/usr/bin/containerd-shim-runc-v2 -namespace moby -id {OWN_ID} -address /x.sock")
    add_proc(proc, 510, 1, "containerd-shim", cpu=1,
             cmdline=f"/usr/bin/containerd-shim-runc-v2 -namespace moby -id {FOREIGN_ID} -address /x.sock")
    add_proc(proc, 520, 500, "runc", cpu=0)  # our shim deleting the container
    add_proc(proc, 530, 510, "runc", cpu=1)  # the other shim's
    add_proc(proc, 600, 500, "python3", cpu=0, container=OWN_ID, threads=[(601, "R", 1)])  # the run's training
    add_proc(proc, 610, 510, "dockerd", cpu=1, container=FOREIGN_ID)  # a tenant's container, named like the engine
    add_proc(proc, 700, 1, "python3", cpu=0)  # a tenant on the host
    add_proc(proc, 701, 1, "python3", cpu=1)  # once the runner's child, reparented when its parent exited
    add_proc(proc, 800, 1, "python3", cpu=5)  # busy, but not on the run's CPUs
    add_proc(proc, 810, ME, "python3", state="S", cpu=0)  # the runner's, asleep
    return proc


def is_own(cid: str | None) -> bool:
    return cid == OWN_ID


def test_fake_tree_is_classified_by_whose_work_it_is(tree):
    counter = RunnableCounter(is_own, me=ME, proc=tree)
    seen = counter.count({0, 1}, skip_tids=[101])
    assert counter.last == {
        ME: RUNNER, 200: RUNNER, 201: RUNNER,  # the runner and its descendants
        400: RUNNER, 410: RUNNER, 500: RUNNER,  # the engine, and the shim of the run's container
        520: RUNNER,  # what that shim started
        510: OTHER, 530: OTHER,  # the shim of another container, and what it started
        600: OWN,  # the run's container
        610: OTHER, 700: OTHER, 701: OTHER,
    }
    # The runner's leader (its sampler thread left out), 200, 201, dockerd's 2 threads, containerd,
    # our shim and its runc.
    assert seen == contention.RunnableCount(other=5, runner=8, own=2)
    # Without leaving the sampler's thread out, it would count as the runner's own work.
    assert RunnableCounter(is_own, me=ME, proc=tree).count({0, 1}).runner == 9
    # Only the CPUs asked about: on CPU 0 alone.
    only0 = RunnableCounter(is_own, me=ME, proc=tree)
    assert only0.count({0}, skip_tids=[101]) == contention.RunnableCount(other=1, runner=4, own=1)


def test_engine_is_the_runner_only_when_root_or_ours(tree):
    counter = RunnableCounter(is_own, me=ME, proc=tree)
    counter.uids = {424242}  # the fake tree's files are not that user's: a look-alike, not the engine
    counter.count({0, 1})
    assert counter.last[400] == OTHER and counter.last[410] == OTHER and counter.last[500] == OTHER
    assert counter.last[520] == OTHER
    assert counter.last[200] == RUNNER  # descent does not depend on the owner


def test_a_shim_counts_as_the_runners_once_its_container_is_known_to_be_the_runs(tree):
    known: set[str] = set()
    counter = RunnableCounter(lambda cid: cid in known, me=ME, proc=tree)
    counter.count({0, 1})
    assert counter.last[500] == OTHER and counter.last[600] == OTHER  # the run's container not started yet
    known.add(OWN_ID)
    counter.count({0, 1})
    assert counter.last[500] == RUNNER and counter.last[600] == OWN


def test_what_a_process_is_is_read_once_per_pid_and_start_time(tree, monkeypatch):
    reads: list[str] = []
    real = contention._container_of

    def counting(pid, proc=contention.PROC):
        reads.append(pid)
        return real(pid, proc)

    monkeypatch.setattr(contention, "_container_of", counting)
    counter = RunnableCounter(is_own, me=ME, proc=tree)
    counter.count({0, 1})
    assert sorted(map(int, reads)) == sorted(counter.last)  # only processes runnable on the CPUs
    reads.clear()
    counter.count({0, 1})
    assert reads == []  # cached
    # A new process on a reused pid (another start time): read again, and classified anew.
    add_proc(tree, 700, 1, "python3", cpu=0, container=OWN_ID, start=2000)
    counter.count({0, 1})
    assert reads == ["700"] and counter.last[700] == OWN
    # The same start time: the cache stands even if the cgroup file says otherwise.
    (tree / "610" / "cgroup").write_text(f"0::/docker/{OWN_ID}\n")
    counter.count({0, 1})
    assert counter.last[610] == OTHER
    # A process gone is forgotten.
    for path in sorted((tree / "701").rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    (tree / "701").rmdir()
    counter.count({0, 1})
    assert 701 not in counter._facts and 700 in counter._facts


def test_descent_follows_the_parents_of_this_sample(tree):
    counter = RunnableCounter(is_own, me=ME, proc=tree)
    counter.count({0, 1})
    assert counter.last[201] == RUNNER
    add_proc(tree, 201, 1, "sh", cpu=1)  # its parent exited: reparented to init, same process
    counter.count({0, 1})
    assert counter.last[201] == OTHER


def _sample(sampler: ContentionSampler, n: int = 3, limit_s: float = 20) -> ContentionSummary:
    sampler.start()
    deadline = time.monotonic() + limit_s  # a loaded host starves the sampler too
    while sampler.samples_taken < n and time.monotonic() < deadline:
        time.sleep(0.05)
    summary = sampler.stop()
    assert sampler.error is None
    return summary


def test_the_runners_own_work_is_reported_apart_never_as_contention(tree, monkeypatch):
    monkeypatch.delenv("RUNNER_MAX_OTHER_RUNNABLE", raising=False)
    monkeypatch.delenv("RUNNER_MAX_STEAL", raising=False)
    for pid in (510, 530, 610, 700, 701):  # no other tenant this time
        (tree / str(pid) / "stat").write_text(_stat(pid, "python3", "S", 1, 0))
    summary = _sample(ContentionSampler("0-1", is_own, interval_s=0.02, proc=tree, me=ME))
    assert summary.samples >= 3
    assert summary.other_runnable_per_cpu == 0.0 and summary.other_runnable_peak == 0
    # 100's leader and 101 (the sampler's tid is the real thread's, not 101), 200, 201, 400x2, 410, 500, 520
    assert summary.runner_runnable_peak == 9 and summary.runner_runnable_per_cpu == pytest.approx(4.5)
    assert summary.problem() is None
    note = summary.note()
    assert note and "4.50 runnable tasks per CPU" in note and "not counted as CPU contention" in note
    record = summary.to_dict()
    assert {"cpus", "samples", "steal_fraction", "other_runnable_per_cpu", "other_runnable_peak"} <= set(record)
    assert record["runner_runnable_per_cpu"] == pytest.approx(4.5) and record["runner_runnable_peak"] == 9


def test_other_tenants_still_make_contention(tree, monkeypatch):
    monkeypatch.delenv("RUNNER_MAX_OTHER_RUNNABLE", raising=False)
    monkeypatch.delenv("RUNNER_MAX_STEAL", raising=False)
    summary = _sample(ContentionSampler("0-1", is_own, interval_s=0.02, proc=tree, me=ME))
    assert summary.other_runnable_peak == 5 and summary.other_runnable_per_cpu == pytest.approx(2.5)
    assert summary.problem().startswith("CPU contention: 2.50 other runnable tasks per CPU")


def test_a_small_runner_share_gives_no_note():
    summary = ContentionSummary([0, 1], 10, 0.0, 0.0, 0, runner_runnable_per_cpu=0.1, runner_runnable_peak=1)
    assert summary.note() is None and summary.problem() is None
    old = ContentionSummary([0, 1], 10, 0.0, 0.0, 0)  # as built before the runner's share
    assert old.runner_runnable_per_cpu == 0.0 and old.note() is None


# --- the guards: a note in the result, not a non-conformance ---------------------------------

class _Stub:
    def __init__(self, value=None):
        self.value = value

    def start(self):
        return self

    def stop(self):
        return self.value


def _result() -> SimpleNamespace:
    result = SimpleNamespace(conforming=True, nonconforming_reasons=[], status="complete",
                             training=SimpleNamespace(notes=["earlier note"]))

    def not_conforming(reason):
        result.nonconforming_reasons.append(reason)
        result.conforming = False

    result.not_conforming = not_conforming
    result.ended = lambda status, reason: None
    return result


def test_guards_put_the_runners_share_in_a_note_and_keep_the_run_conforming(monkeypatch):
    monkeypatch.delenv("RUNNER_MAX_OTHER_RUNNABLE", raising=False)
    monkeypatch.delenv("RUNNER_MAX_STEAL", raising=False)
    guards = RunGuards.__new__(RunGuards)  # no engine: only the verdict's wiring
    summary = ContentionSummary([0, 1], 20, 0.0, 0.05, 1, runner_runnable_per_cpu=0.9, runner_runnable_peak=3)
    guards.contention, guards.quota, guards.energy = _Stub(summary), _Stub(None), _Stub(None)
    guards.gpu_sharing = None
    from runner import events as run_events
    guards._dropped_before = run_events.dropped()
    verdict = guards.stop()
    assert verdict.nonconforming == [] and verdict.contention is summary
    assert len(verdict.notes) == 1 and verdict.notes[0].startswith("runner's own work on the run's cores: 0.90")
    result = _result()
    assemble.guarded(result, verdict)
    assemble.guarded(result, verdict)  # said once
    assert result.conforming and result.nonconforming_reasons == []
    assert result.training.notes == ["earlier note", verdict.notes[0]]
    # A result without a training record (a run that never trained) takes no note, and no error.
    bare = _result()
    bare.training = None
    assemble.guarded(bare, verdict)
    assert bare.conforming


def test_guards_still_mark_other_tenants_contention():
    verdict = GuardVerdict(nonconforming=["CPU contention: x"], notes=["runner's own work: y"])
    result = _result()
    assemble.guarded(result, verdict)
    assert not result.conforming and result.nonconforming_reasons == ["CPU contention: x"]


# --- real processes ------------------------------------------------------------------------

HOG = [sys.executable, "-c", "while True: pass"]


def _cpu() -> int:
    return min(os.sched_getaffinity(0))


def _parent_of(pid: int) -> int:
    text = Path(f"/proc/{pid}/stat").read_text()
    return int(text[text.rfind(")") + 2:].split()[1])


def _foreign_hog() -> int:
    """A busy process that is no descendant of this one: started by a child that exits at
    once, so it is reparented to init (or the nearest subreaper above this process)."""
    code = ("import subprocess as s; print(s.Popen("
            f"{HOG!r}, start_new_session=True, stdin=s.DEVNULL, stdout=s.DEVNULL, stderr=s.DEVNULL).pid)")
    pid = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             timeout=30).stdout)
    ancestors, p = set(), pid
    while p > 1 and len(ancestors) < 100:
        p = _parent_of(p)
        ancestors.add(p)
    assert os.getpid() not in ancestors
    return pid


@pytest.fixture
def hogs():
    """Busy processes, pinned to one CPU: ``child()`` (the test process's, i.e. the runner's
    own) and ``foreign()`` (another tenant's); all killed afterwards, by pid."""
    cpu, children, foreign = _cpu(), [], []

    def child() -> int:
        proc = subprocess.Popen(HOG)
        children.append(proc)
        os.sched_setaffinity(proc.pid, {cpu})
        return proc.pid

    def other() -> int:
        pid = _foreign_hog()
        foreign.append(pid)
        os.sched_setaffinity(pid, {cpu})
        return pid

    yield SimpleNamespace(cpu=cpu, child=child, foreign=other)
    for proc in children:
        proc.kill()
        proc.wait()
    for pid in foreign:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _count_until(counter: RunnableCounter, cpus: set[int], pids: list[int], limit_s: float = 5.0) -> None:
    """Count until every pid was seen runnable (a busy loop almost always is)."""
    deadline = time.monotonic() + limit_s
    while True:
        counter.count(cpus)
        if all(p in counter.last for p in pids) or time.monotonic() > deadline:
            return
        time.sleep(0.05)


def test_real_child_is_the_runners_and_a_real_stranger_is_other(hogs):
    child, stranger = hogs.child(), hogs.foreign()
    counter = RunnableCounter()
    _count_until(counter, {hogs.cpu}, [child, stranger])
    assert counter.last.get(child) == RUNNER
    assert counter.last.get(stranger) == OTHER


def test_real_calling_thread_is_left_out_when_asked():
    counter = RunnableCounter()
    cpus = set(range(os.cpu_count() or 1))
    counter.count(cpus)
    assert counter.last.get(os.getpid()) == RUNNER  # running while it reads its own stat
    counter.count(cpus, skip_tids=[threading.get_native_id()])
    assert os.getpid() not in counter.last


def test_real_sampler_counts_its_children_apart_from_strangers(hogs, monkeypatch):
    monkeypatch.delenv("RUNNER_MAX_OTHER_RUNNABLE", raising=False)
    hogs.child()
    sampler = ContentionSampler(str(hogs.cpu), interval_s=0.1)
    summary = _sample(sampler, n=5)
    # The child is runnable on the CPU at every sample: the runner's, not a tenant's.
    assert summary.samples >= 5 and summary.runner_runnable_per_cpu >= 0.8
    assert summary.note() is not None

    hogs.foreign()
    summary = _sample(ContentionSampler(str(hogs.cpu), interval_s=0.1), n=5)
    assert summary.other_runnable_per_cpu >= 0.8 and "CPU contention" in summary.problem()
    assert summary.runner_runnable_per_cpu >= 0.8  # the child, still the runner's
