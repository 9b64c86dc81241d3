"""Work that runs beside the caller's: one thread per piece of work, its answer (or its error)
handed over when the caller asks for it. For stages that wait on different things (the
network, the engine, the disk) and need not wait on each other."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar, cast

T = TypeVar("T")


class Background(Generic[T]):
    """``work()`` in a thread of its own; ``result()`` waits for it and returns (or raises)
    what it did. The thread is a daemon: a command that fails in the foreground does not
    wait for it to end."""

    def __init__(self, work: Callable[[], T], name: str = "background"):
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(work,), name=name, daemon=True)
        self._thread.start()

    def _run(self, work: Callable[[], T]) -> None:
        try:
            self._value = work()
        except BaseException as exc:  # handed to the caller of result()
            self._error = exc

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return cast(T, self._value)
