"""The one error type a user sees: what went wrong, and how to fix it, on one line."""


class UserError(Exception):
    """A problem the user can fix. The CLI prints it as one line and exits non-zero."""

    exit_code = 2

    def __init__(self, problem: str, fix: str | None = None):
        self.problem = problem.rstrip(".")
        self.fix = fix.rstrip(".") if fix else None
        super().__init__(str(self))

    def __str__(self) -> str:
        return f"{self.problem}. Fix: {self.fix}." if self.fix else f"{self.problem}."
