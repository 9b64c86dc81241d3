"""The harness' one error type: a message a user can act on, and an exit code."""

from __future__ import annotations


class HarnessError(Exception):
    """Printed as ``harness: error: <message>`` on stderr; the process exits non-zero."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code
