"""The runner's one error family: what went wrong, and how to fix it, on one line.

Every exception class under ``runner/`` derives from ``RunnerError`` (a test walks them), so
an error that escapes a command reaches the user the same way, ``runner: error: PROBLEM. Fix:
FIX.``, never as a traceback. ``UserError`` is the family's input-error branch (exit status 2);
the rest are failures the runner met on the way (an engine's refusal, an entry's hostile
output), which their callers mostly catch and record, and which exit 1 when one escapes.
(The harness runs inside the entry's image without this package: ``HarnessError`` is its own.)"""


def sentence(problem: str, fix: str | None) -> str:
    """``problem. Fix: fix.``, or ``problem.`` without a fix: one full stop each."""
    problem = problem.rstrip(".")
    return f"{problem}. Fix: {fix.rstrip('.')}." if fix else f"{problem}."


class RunnerError(Exception):
    """An error of the runner's: ``problem`` and ``fix`` as the raise site said them.

    A site that raises with the message alone (``EngineError("...")``) gets its class's
    ``default_fix`` when the error reaches the command line; ``str()`` stays the message as
    raised, since callers quote it in their own sentences and records."""

    exit_code = 1  # what an uncaught exception exited with before the family had one line
    default_fix: str | None = None

    def __init__(self, problem: str, fix: str | None = None):
        self.problem = problem
        self.fix = fix
        super().__init__(str(self))

    def __str__(self) -> str:
        return self.problem if self.fix is None else sentence(self.problem, self.fix)

    def line(self) -> str:
        """The one line the command line prints: the problem and the fix, the raise site's
        or else the class's."""
        return sentence(self.problem, self.fix or self.default_fix)


class UserError(RunnerError):
    """A problem the user can fix. The CLI prints it as one line and exits non-zero."""

    exit_code = 2

    def __init__(self, problem: str, fix: str | None = None):
        super().__init__(problem.rstrip("."), fix.rstrip(".") if fix else None)

    def __str__(self) -> str:
        return sentence(self.problem, self.fix)


class BuildError(UserError):
    """An entry's image that failed to build: the one line that explains it, and the whole
    builder output (``build_log``), which ``runner build -v`` prints above it."""

    def __init__(self, problem: str, fix: str | None = None, build_log: list[str] | None = None):
        super().__init__(problem, fix)
        self.build_log: list[str] = build_log or []
