"""The project's lint (pyproject.toml's [tool.ruff]) passes on the whole package, and reads
every folder of it: ruff's default excludes would skip runner/entry_build (named like a build
output), so the configuration replaces them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True)


def test_the_lint_reads_every_package_folder_runner_build_included():
    listed = {Path(line.strip()).resolve() for line in _ruff("check", "--show-files", "runner").stdout.splitlines()
              if line.strip().endswith(".py")}
    sources = {p.resolve() for p in (ROOT / "runner").rglob("*.py") if "__pycache__" not in p.parts}
    assert (ROOT / "runner" / "build" / "context.py").resolve() in listed
    assert sources - listed == set()


def test_the_package_passes_the_lint():
    done = _ruff("check", "runner", "--output-format", "concise")
    assert done.returncode == 0, done.stdout + done.stderr
