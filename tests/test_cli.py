"""The ``runner`` command: every subcommand is listed and has its own --help."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from runner.cli import COMMANDS, main


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
