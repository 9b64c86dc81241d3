"""The package passes its type checker (pyproject.toml's [tool.mypy]; CI runs it through this
test): the packages a run's state passes through (the plan, the result, the bundle, the
verifier, the training and inference stages, the engines and the scoring) may only lose errors,
down to none, and so may the rest of the package. A ceiling is the count when it was written:
whoever removes errors lowers it to the new count, which the test prints."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
import warnings
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The strict packages and their ceilings (issue 49: the goal is 0 in each). Lower a number
# when you remove errors; never raise one: type the code instead.
STRICT_CEILING = {
    "runner/plan.py": 0,
    "runner/results": 0,
    "runner/bundle": 0,
    "runner/verify": 0,
    "runner/run": 0,
    "runner/engine": 0,
    "runner/score": 0,
}
# Everything else under runner/: the same rule.
REST_CEILING = 0

ERROR = re.compile(r"^(?P<path>runner/[^:]+\.py):\d+: error: ", re.MULTILINE)
SUMMARY = re.compile(r"^(Success: no issues found in \d+ source files|"
                     r"Found \d+ errors? in \d+ files? \(checked \d+ source files\))$", re.MULTILINE)


def _package(path: str) -> str:
    """The strict package ``path`` belongs to, or "rest"."""
    for strict in STRICT_CEILING:
        if path == strict or path.startswith(strict + "/"):
            return strict
    return "rest"


@pytest.fixture(scope="module")
def counts(tmp_path_factory) -> Counter:
    """mypy's errors over runner/, counted per strict package ("rest" for the others)."""
    cache = tmp_path_factory.mktemp("mypy_cache")
    done = subprocess.run([sys.executable, "-m", "mypy", "runner", "--cache-dir", str(cache), "--no-pretty",
                           "--show-error-codes", "--no-color-output"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    # 0: no error, 1: errors found; anything else (2: a crash or a bad configuration) is a failure.
    assert done.returncode in (0, 1), done.stdout + done.stderr
    assert SUMMARY.search(done.stdout), done.stdout[-3000:] + done.stderr
    found = Counter(_package(m["path"]) for m in ERROR.finditer(done.stdout))
    print("mypy errors per package:", dict(sorted(found.items())))
    return found


def test_the_type_checker_reads_the_projects_configuration():
    """The ceilings count errors under this configuration: strict optional checking on Python 3.11."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["python_version"] == "3.11" and config["strict_optional"] is True


def _held(name: str, count: int, ceiling: int) -> None:
    assert count <= ceiling, (f"{name}: mypy finds {count} errors, more than its ceiling {ceiling}; "
                              f"run `mypy runner` and type the code you changed (don't raise the ceiling)")
    if count < ceiling:
        warnings.warn(f"{name}: mypy finds {count} errors, fewer than its ceiling {ceiling}: "
                      f"lower the ceiling in tests/test_types.py to {count}", stacklevel=2)


@pytest.mark.parametrize("package", sorted(STRICT_CEILING))
def test_a_strict_package_gains_no_type_error(counts, package):
    _held(package, counts[package], STRICT_CEILING[package])


def test_the_rest_of_the_package_gains_no_type_error(counts):
    print(f"mypy errors outside the strict packages: {counts['rest']} (ceiling {REST_CEILING})")
    _held("the rest of runner/", counts["rest"], REST_CEILING)
