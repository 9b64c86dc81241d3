"""The project's lint (pyproject.toml's [tool.ruff]) passes on the whole package and reads every
folder of it; no package folder is named like a build output (tools skip such folders as
generated: the image-build stage was runner/build before it became runner/entry_build)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True)


# Folder names that linters, coverage, packaging and code-structure tools skip as generated output.
OUTPUT_NAMES = {"build", "dist", "out", "target", "_build"}


def test_the_lint_reads_every_package_folder():
    listed = {Path(line.strip()).resolve() for line in _ruff("check", "--show-files", "runner").stdout.splitlines()
              if line.strip().endswith(".py")}
    sources = {p.resolve() for p in (ROOT / "runner").rglob("*.py") if "__pycache__" not in p.parts}
    assert (ROOT / "runner" / "entry_build" / "context.py").resolve() in listed
    assert sources - listed == set()


def test_no_package_folder_is_named_like_a_build_output():
    named = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "runner").rglob("*")
                   if p.is_dir() and p.name in OUTPUT_NAMES)
    assert named == [], f"tools skip these folders as generated output; name them for what they do: {named}"


def test_the_package_passes_the_lint():
    done = _ruff("check", "runner", "--output-format", "concise")
    assert done.returncode == 0, done.stdout + done.stderr
