"""An MLPerf training submission tree from reproduced results (open division).

Layout (what ``mlperf_logging.package_checker FOLDER training 4.0.0`` reads)::

    OUT/systems/<system>.json                         the system description
    OUT/results/<system>/<benchmark>/result_<i>.txt   one MLPerf log per run
    OUT/benchmarks/<benchmark>/implementations/<entry>/   the entry's code, as run

MLPerf scores a benchmark over a fixed number of runs (resnet: 5) with the olympic mean,
so the export refuses any other number of results, naming how many more to run, and refuses
what would inflate that count: the same run twice (its run id, its clock record
``events.jsonl`` or its rendered log), runs of several entries, smoke runs. Results may be
folders or bundles' ``.tar.gz``, opened as ``runner verify`` opens them. ``package_check``
runs MLPerf's own package checker on the tree (``pip install -e '.[mlperf]'``).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from runner import paths
from runner.bundle.open import open_results
from runner.errors import UserError
from runner.mlperf.system import submission_description
from runner.mlperf.config import SubmissionConfig, load_submission, set_command
from runner.mlperf.from_result import mlperf_run_from_result, read_result
from runner.mlperf.training_log import SUBMISSION_KEYS, render_training_log

RULESETS = ("4.0.0",)
# Runs per benchmark the 4.0.0 package checker expects (mlperf_logging.benchmark_meta).
RESULT_COUNT = {"resnet": 5, "bert": 10}
ENTRY_FILES_SKIPPED = {"__pycache__", ".git"}


def system_id(platform: str) -> str:
    """A file and folder name for the platform: letters, digits, '-', '_' and '.'."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", platform).strip("_.")
    if not name:
        raise UserError(f"mlperf.platform {platform!r} has no usable characters", set_command("platform", "cpu-2core-x86"))
    return name


def system_description_for(result_dir: Path, submission: SubmissionConfig) -> dict[str, str]:
    """The training system description for the host that ran ``result_dir``."""
    result = read_result(result_dir)
    try:
        fingerprint = json.loads((Path(result_dir) / "fingerprint.json").read_text())
    except (OSError, json.JSONDecodeError):
        raise UserError(f"{result_dir} has no readable fingerprint.json",
                        "restore it from the result's signed bundle") from None
    framework = result.get("entry", {}).get("framework") or {}
    fallback = f"{framework.get('name', '')} {framework.get('version', '')}".strip()
    fields, missing = submission_description(fingerprint, submission.values, "training", fallback)
    if missing:
        key = missing[0].removeprefix("mlperf.")
        raise UserError(f"the MLPerf system description needs {missing[0]}, which is not set"
                        + (f" (also missing: {', '.join(missing[1:])})" if missing[1:] else ""),
                        set_command(key))
    return fields


def unset_settings(result_dir: Path, submission: SubmissionConfig) -> list[str]:
    """Settings still empty that MLPerf's inference checker also wants non-empty (the
    training checker accepts them empty); each is left empty rather than guessed."""
    fingerprint = json.loads((Path(result_dir) / "fingerprint.json").read_text())
    return submission_description(fingerprint, submission.values, "inference")[1]


def _copy_entry_code(entry_name: str, result: dict, target: Path) -> None:
    """The entry's files as they are in this checkout, with the digests the result recorded."""
    source = paths.repo_root() / "entries" / entry_name
    target.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        for item in sorted(source.iterdir()):
            if item.name in ENTRY_FILES_SKIPPED:
                continue
            if item.is_dir():
                shutil.copytree(item, target / item.name, ignore=shutil.ignore_patterns(*ENTRY_FILES_SKIPPED))
            else:
                shutil.copy2(item, target / item.name)
    digests = result.get("entry", {}).get("digests", {})
    (target / "README.md").write_text(
        f"# {entry_name}\n\nReproduced by runner {result.get('toolkit', {}).get('version', '')}; "
        f"each result's signed bundle holds its own record.\n\nRecorded digests (sha256) of the run:\n\n"
        + "".join(f"- {name}: {digest}\n" for name, digest in sorted(digests.items()))
    )


@dataclass(frozen=True)
class Exported:
    """The written tree, and the settings MLPerf's inference checker would also want set."""

    out: Path
    unset: list[str]


def _require_settings(submission: SubmissionConfig) -> None:
    """Every submission setting the export needs, all the missing ones named at once."""
    missing = [key for key in SUBMISSION_KEYS if submission.get(key) is None]
    if missing:
        raise UserError("the MLPerf export needs " + ", ".join(f"mlperf.{key}" for key in missing)
                        + (", which is not set" if len(missing) == 1 else ", which are not set"),
                        "; ".join(set_command(key) for key in missing))


def _digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def _refuse_duplicates(results: list[tuple[Path, dict]], logs: list[str]) -> None:
    """The same run passed twice (by run id, by its clock record, by its rendered log) would
    count twice in MLPerf's olympic mean."""
    seen: dict[tuple[str, object], Path] = {}
    for (folder, result), log in zip(results, logs):
        for key in (("run id", result.get("run_id")), ("events.jsonl", _digest(folder / "events.jsonl")),
                    ("MLPerf log", hashlib.sha256(log.encode()).hexdigest())):
            if key[1] is None:
                continue
            if key in seen:
                raise UserError(f"{folder} and {seen[key]} are the same run (the same {key[0]}"
                                + (f" {key[1]}" if key[0] == "run id" else "") + "): MLPerf would count it twice",
                                "pass each run once; run more with `runner reproduce ENTRY --runs N`")
            seen[key] = folder


def export_mlperf(result_dirs: list[Path], out: Path, *, ruleset: str = "4.0.0",
                  submission: SubmissionConfig | None = None, allow_smoke: bool = False) -> Exported:
    """Write the submission tree to ``out`` (which must not exist yet)."""
    if ruleset not in RULESETS:
        raise UserError(f"ruleset {ruleset} is not supported", f"use --ruleset {RULESETS[-1]}")
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise UserError(f"{out} already exists and is not empty", "choose a new --out folder")
    submission = submission if submission is not None else load_submission()
    _require_settings(submission)
    with ExitStack() as stack:
        return _write_tree(open_results(result_dirs, stack), out, ruleset, submission, allow_smoke)


def _write_tree(result_dirs: list[Path], out: Path, ruleset: str, submission: SubmissionConfig,
                allow_smoke: bool) -> Exported:
    results = [(d, read_result(d)) for d in result_dirs]
    entries = {r.get("entry", {}).get("name") for _, r in results}
    if len(entries) != 1:
        raise UserError(f"the results come from several entries ({', '.join(sorted(map(str, entries)))})",
                        "export the runs of one entry at a time")
    smoke = [r["run_id"] for _, r in results if r.get("smoke")]
    if smoke and not allow_smoke:
        raise UserError(f"{smoke[0]} is a smoke run (synthetic data), not a submission",
                        "export full runs, or pass --allow-smoke to try the format")
    runs = [mlperf_run_from_result(d, submission) for d, _ in results]
    logs = [render_training_log(run) for run in runs]
    _refuse_duplicates(results, logs)
    benchmark = runs[0].benchmark
    needed = RESULT_COUNT.get(benchmark)
    if needed is not None and len(runs) != needed:
        entry = next(iter(entries))
        more = needed - len(runs)
        fix = (f"run {more} more (e.g. 'runner reproduce entries/{entry} --runs {more} --seed N') and pass all {needed}"
               if more > 0 else f"pass exactly {needed} result folders")
        raise UserError(f"MLPerf scores {benchmark} over exactly {needed} runs (olympic mean); got {len(runs)}", fix)

    system = system_id(submission.platform)
    description = system_description_for(results[0][0], submission)
    description["system_name"] = submission.platform
    out.mkdir(parents=True, exist_ok=True)
    (out / "systems").mkdir()
    (out / "systems" / f"{system}.json").write_text(json.dumps(description, indent=2) + "\n")
    folder = out / "results" / system / benchmark
    folder.mkdir(parents=True)
    for i, log in enumerate(logs):
        (folder / f"result_{i}.txt").write_text(log)
    entry_name = next(iter(entries))
    _copy_entry_code(entry_name, results[0][1], out / "benchmarks" / benchmark / "implementations" / entry_name)
    return Exported(out, unset_settings(results[0][0], submission))


@dataclass(frozen=True)
class PackageCheck:
    ok: bool
    output: str  # the checker's last lines


def package_check(out: Path, ruleset: str) -> PackageCheck:
    """MLPerf's own package checker on the tree (``mlperf_logging.package_checker``)."""
    try:
        import mlperf_logging  # noqa: F401  # lazy: optional (mlperf-logging, the mlperf extra: is it installed?)
    except ImportError:
        raise UserError("--check needs MLPerf's checker (mlperf-logging), which is not installed",
                        "pip install -e '.[mlperf]'") from None
    log = out.parent / f"{out.name}.package-checker.log"
    proc = subprocess.run([sys.executable, "-m", "mlperf_logging.package_checker", str(out), "training", ruleset,
                           "--log_output", str(log)], capture_output=True, text=True, cwd=out.parent)
    text = (proc.stdout + proc.stderr).strip()
    return PackageCheck("PACKAGE CHECKER FOUND NO ERRORS, SUCCESS" in text, "\n".join(text.splitlines()[-15:]))
