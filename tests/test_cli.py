"""The ``runner`` command: every subcommand is listed and has its own --help."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from runner.cli import COMMANDS, ls, main
from runner.engine.interface import BuildFailed, EngineError, NotFound
from runner.errors import UserError
from runner.score.tta import EventStreamError


def test_top_level_help_lists_every_subcommand(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert f"    {name}" in out, name


@pytest.mark.parametrize("name", COMMANDS)
def test_every_subcommand_has_help(name, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([name, "--help"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: runner {name}")


def test_console_script_is_installed():
    """The `runner` command beside this interpreter (the venv's bin/, or the system's)."""
    script = Path(sys.executable).parent / "runner"
    out = subprocess.run([str(script), "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("runner ")


def test_user_errors_are_one_line_without_traceback(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "runner", "reproduce", str(tmp_path / "missing-entry")],
        capture_output=True, text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("runner: error: no entry folder at")


def _raising(error: Exception):
    def run(args) -> int:
        raise error
    return run


def test_an_engine_error_escaping_a_command_is_one_line_with_a_fix(monkeypatch, capsys):
    """An error the runner met on the way (here the engine's refusal) that no caller caught
    reaches the user as the family's one line, its class's fix, exit status 1: no traceback."""
    monkeypatch.setattr(ls, "run", _raising(EngineError("the engine refused to list containers: 500 Server Error")))
    assert main(["ls"]) == 1
    err = capsys.readouterr().err
    assert err == ("runner: error: the engine refused to list containers: 500 Server Error. Fix: check that the "
                   "container engine is running and not hung (`runner doctor`), then run the command again.\n")


def test_each_error_keeps_its_message_and_its_fix(monkeypatch, capsys):
    """``str()`` is the message as raised (callers quote it in their records); the one line
    adds the raise site's fix, else the class's; a user error stays exit status 2."""
    assert str(NotFound("no such image: x")) == "no such image: x"
    assert str(UserError("no entry.", "name one.")) == "no entry. Fix: name one."
    assert isinstance(EventStreamError("two launch stamps"), ValueError)  # its callers catch ValueError
    with pytest.raises(EngineError, match="^step 3 failed$"):
        raise BuildFailed("step 3 failed")
    for error, code, line in [
        (NotFound("no such image: x"), 1, "no such image: x. Fix: rebuild the entry if its image is gone"),
        (EngineError("busy.", "wait a minute."), 1, "busy. Fix: wait a minute.\n"),
        (UserError("no entry", "name one"), 2, "no entry. Fix: name one.\n"),
    ]:
        monkeypatch.setattr(ls, "run", _raising(error))
        assert main(["ls"]) == code
        err = capsys.readouterr().err
        assert err.startswith(f"runner: error: {line}") and err.count("\n") == 1
