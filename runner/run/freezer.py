"""Freezing the training: rank 0's container (the engine's ``freeze``: the cgroup freezer)
and every other rank with it, and on a run with GPUs the wait until they are idle (class 2c).
Only a freeze every rank confirmed counts as frozen; what could not be frozen is said in the
run's notes."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from runner.engine.interface import EngineError, NotFound
from runner.run.gpu_freeze import GpuFreeze

if TYPE_CHECKING:
    from runner.engine.interface import Container

FROZEN, RUNNING, EXITED = "frozen", "running", "exited"


class RankGroup(Protocol):
    """The other ranks of a run, started with rank 0 (``multiprocess.Peers`` on this host,
    ``remote_nodes.RemoteNodes`` on other nodes)."""

    on_failure: Callable[[str, str | None], None] | None

    def start(self) -> None: ...

    def each(self, action: str) -> dict[int, str] | None: ...

    def stop(self, grace_s: float = 60) -> str | None: ...


class Freezer:
    """Freezes and thaws every rank of the run; ``notes`` receives what went wrong."""

    def __init__(self, gpus: int, clock: Callable[[], float], notes: list[str]):
        self.clock, self.notes = clock, notes
        self.container: Container | None = None  # rank 0, once it started
        self.peers: list[RankGroup] = []
        self.frozen_ranks: dict[int, str] = {}  # rank -> its state in the last freeze
        # A run with GPUs: each freeze also waits for them to be idle (class 2c).
        self.gpu_freeze = GpuFreeze(gpus) if gpus else None

    def freeze(self) -> str:
        """"frozen", "exited" (nothing left to freeze) or "running" (the engine refused, or a
        rank was not confirmed paused: then nothing counts as frozen)."""
        if self.container is None:
            return EXITED
        try:
            self.container.freeze()
            self.frozen_ranks = {0: "paused"}
            for group in self.peers:
                states = group.each("pause")
                if states is None or any(s not in ("paused", "exited") for s in states.values()):
                    self.notes.append(f"a freeze was not confirmed by every rank ({states}): its evaluation time counts")
                    self.thaw(FROZEN)
                    return RUNNING
                self.frozen_ranks.update(states)
            return FROZEN
        except NotFound:
            return EXITED
        except EngineError:
            try:
                status = self.container.state().status
            except NotFound:
                return EXITED
            return RUNNING if status in ("running", "restarting") else EXITED

    def thaw(self, state: str) -> None:
        if state != FROZEN or self.container is None:
            return
        for group in self.peers:
            group.each("unpause")
        try:
            self.container.thaw()
        except EngineError:
            pass  # removed meanwhile (a timeout or Ctrl-C): nothing to thaw

    def ranks(self, state: str) -> dict:
        """The ``ranks`` field of a freeze on a run of several ranks: each one's state."""
        if not self.peers or state != FROZEN:
            return {}
        return {"ranks": {str(r): s for r, s in sorted(self.frozen_ranks.items())}}

    def wait_for_gpus(self, state: str, paused_t: float, index: int) -> dict:
        """After a pause on a run with GPUs: wait until the run's GPUs are idle. The event
        fields say how long the busy tail was (``gpu_tail_seconds``, from the pause stamp to
        the excluded window's start, counted as training) and whether they settled idle at
        all (if not, nothing of this evaluation is excluded)."""
        if self.gpu_freeze is None or state != FROZEN:
            return {}
        tail = self.gpu_freeze.after_pause()
        fields = tail.event_fields()
        fields["gpu_tail_seconds"] = round(max(0.0, self.clock() - paused_t), 6)
        if not tail.idle:
            why = tail.error or f"they were still busy {tail.tail_seconds:.1f} s after the pause"
            self.notes.append(f"evaluation {index}: the run's GPUs were not idle after the freeze ({why}); "
                              "its evaluation time counts (class 2c)")
        return fields

    def stop_rank0(self) -> None:
        """Stop rank 0 (another rank ended badly: its collectives would wait forever)."""
        if self.container is None:
            return
        try:
            self.container.stop()
        except EngineError:
            pass

    def close(self) -> None:
        if self.gpu_freeze is not None:
            self.gpu_freeze.close()
