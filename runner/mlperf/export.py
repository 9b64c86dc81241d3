"""An MLPerf training submission tree from reproduced results (open division).

Layout (what ``mlperf_logging.package_checker FOLDER training 4.0.0`` reads)::

    OUT/systems/<system>.json                         the system description
    OUT/results/<system>/<benchmark>/result_<i>.txt   one MLPerf log per run
    OUT/benchmarks/<benchmark>/implementations/<entry>/   the entry's code, as run

MLPerf scores a benchmark over a fixed number of runs (resnet: 5) with the olympic mean,
so the export refuses any other number of results, naming how many more to run, and refuses
what would make the folder say more than the runs do (``runner.mlperf.admit``): the same run
twice, a seed repeated, runs of several entries or host classes, runs that do not count. The
closed division is refused (``_refuse_closed``). Results may be folders or bundles'
``.tar.gz``, opened as ``runner verify`` opens them. Every refusal comes before anything is
written; the tree is written whole or not at all. MLPerf's own package checker then runs on
it by default (``pip install -e '.[mlperf]'``); a tree it fails is left, marked
``NOT_A_SUBMISSION.txt``, for inspection.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from securesystemslib.signer import SSlibKey

from runner import paths
from runner.bundle.open import open_results
from runner.errors import UserError
from runner.mlperf.admit import (fingerprint_of, refuse_duplicates, refuse_mixed_hosts, refuse_repeated_seeds,
                                 require_counting)
from runner.mlperf.config import SubmissionConfig, load_submission, set_command
from runner.mlperf.from_result import mlperf_run_from_result, read_result
from runner.mlperf.system import submission_description
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
    fingerprint = fingerprint_of(result_dir)
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
    return submission_description(fingerprint_of(result_dir), submission.values, "inference")[1]


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


def _require_settings(submission: SubmissionConfig) -> None:
    """Every submission setting the export needs, all the missing ones named at once."""
    missing = [key for key in SUBMISSION_KEYS if submission.get(key) is None]
    if missing:
        raise UserError("the MLPerf export needs " + ", ".join(f"mlperf.{key}" for key in missing)
                        + (", which is not set" if len(missing) == 1 else ", which are not set"),
                        "; ".join(set_command(key) for key in missing))


def _refuse_closed(submission: SubmissionConfig) -> None:
    """The closed division is a claim this export cannot make true. Its checkers (4.0.0) want
    MLPerf's reference workload: for resnet, ResNet-50 on ImageNet to 75.9 % top-1
    (closed_resnet.yaml), the optimizer's name and hyperparameters at fixed values and
    gradient_accumulation_steps in every log (closed_common.yaml, closed_resnet_sgd/lars.yaml),
    each seed logged with the source file and line that logged it (the seed checker), and
    convergence within MLPerf's reference points (the RCP checker). No runner task is that
    workload (MNIST, CIFAR10 and the DAWNBench ImageNet target of 93 % top-5 report under resnet
    as the closest benchmark), and the runner does not record the entry's optimizer, so the
    tree would either fail the checker or carry hyperparameters nobody measured. Refused before
    anything is read or written."""
    if submission.division == "closed":
        raise UserError("the MLPerf closed division needs MLPerf's reference workload (resnet: ResNet-50 on ImageNet "
                        "to 75.9% top-1, its optimizer's hyperparameters in every log, convergence within MLPerf's "
                        "reference points), which no runner task is: runner results export to the open division only",
                        set_command("division", "open"))


def checker_installed() -> bool:
    """Whether MLPerf's package checker (``mlperf-logging``, the ``[mlperf]`` extra) is here."""
    return importlib.util.find_spec("mlperf_logging") is not None


@dataclass(frozen=True)
class PackageCheck:
    ok: bool
    findings: list[str]  # the checker's errors (or its last lines when it names none), a few lines
    log: Path  # its whole output


@dataclass(frozen=True)
class Exported:
    """The written tree; the settings MLPerf's inference checker would also want set; whether
    smoke runs are in it; MLPerf's package checker's verdict on it (None: not run, ``unchecked``
    says why)."""

    out: Path
    unset: list[str]
    smoke: bool = False
    check: PackageCheck | None = None
    unchecked: str | None = None

    @property
    def submission(self) -> bool:
        """False when the tree is marked as no submission (``NOT_A_SUBMISSION.txt``)."""
        return not self.smoke and (self.check is None or self.check.ok)


NOT_A_SUBMISSION = "NOT_A_SUBMISSION.txt"


def export_mlperf(result_dirs: list[Path], out: Path, *, trusted: list[SSlibKey], ruleset: str = "4.0.0",
                  submission: SubmissionConfig | None = None, allow_smoke: bool = False,
                  check: bool | None = None) -> Exported:
    """Write the submission tree to ``out`` (which must not exist yet, or be empty) from runs
    that count under ``trusted``, then run MLPerf's package checker on it: ``check`` None runs
    it when ``mlperf-logging`` is installed, True requires it, False skips it. A tree that
    fails the checker, or holds smoke runs, is left for inspection with ``NOT_A_SUBMISSION.txt``
    saying why. Every refusal comes before anything is written."""
    if ruleset not in RULESETS:
        raise UserError(f"ruleset {ruleset} is not supported", f"use --ruleset {RULESETS[-1]}")
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"{out} already exists and is not empty", "choose a new --out folder")
    submission = submission if submission is not None else load_submission()
    _require_settings(submission)
    _refuse_closed(submission)
    if check and not checker_installed():
        raise UserError("--check needs MLPerf's package checker (mlperf-logging), which is not installed",
                        "pip install -e '.[mlperf]', or pass --no-check")
    with ExitStack() as stack:
        runs = [(d, read_result(d)) for d in open_results(result_dirs, stack)]
        logs, benchmark, entry = _admit(runs, submission, allow_smoke)
        smoke = require_counting([Path(p) for p in result_dirs], trusted, allow_smoke)
        _write_atomically(out, lambda tree: _write_tree(tree, runs, logs, benchmark, entry, submission))
        unset = unset_settings(runs[0][0], submission)
    reasons = ["it holds smoke runs (synthetic data, one short epoch; exported with --allow-smoke to try the "
               "format): no smoke run counts"] if smoke else []
    unchecked = None
    result = None
    if check is False:
        unchecked = "--no-check"
    elif not checker_installed():
        unchecked = "MLPerf's package checker (mlperf-logging) is not installed: pip install -e '.[mlperf]'"
    else:
        result = package_check(out, ruleset)
        if not result.ok:
            reasons.append(f"MLPerf's package checker failed on it (its output: {result.log.name}, beside this "
                           "tree):\n" + "\n".join(f"  {line}" for line in result.findings))
    if reasons:
        (out / NOT_A_SUBMISSION).write_text("This tree is not an MLPerf submission:\n\n"
                                            + "".join(f"- {reason}\n" for reason in reasons))
    return Exported(out, unset, smoke, result, unchecked)


def _admit(runs: list[tuple[Path, dict]], submission: SubmissionConfig,
           allow_smoke: bool) -> tuple[list[str], str, str]:
    """The runs' logs, benchmark and entry, once every run may stand in one system's benchmark
    folder (``runner.mlperf.admit``)."""
    entries = {r.get("entry", {}).get("name") for _, r in runs}
    if len(entries) != 1:
        raise UserError(f"the results come from several entries ({', '.join(sorted(map(str, entries)))})",
                        "export the runs of one entry at a time")
    entry = str(next(iter(entries)))
    smoke = [r.get("run_id") for _, r in runs if r.get("smoke")]
    if smoke and not allow_smoke:
        raise UserError(f"{smoke[0]} is a smoke run (synthetic data), which never counts",
                        "export full runs, or pass --allow-smoke for a tree marked as no submission (to try the format)")
    mlperf_runs = [mlperf_run_from_result(d, submission) for d, _ in runs]
    logs = [render_training_log(run) for run in mlperf_runs]
    refuse_duplicates(runs, logs)
    refuse_mixed_hosts(runs)  # first: the runs of each host are then exported (and their seeds judged) apart
    refuse_repeated_seeds(runs)
    benchmark = mlperf_runs[0].benchmark
    needed = RESULT_COUNT.get(benchmark)
    if needed is not None and len(runs) != needed:
        more = needed - len(runs)
        fix = (f"run {more} more (e.g. 'runner reproduce entries/{entry} --runs {more} --seed N') and pass all {needed}"
               if more > 0 else f"pass exactly {needed} result folders")
        raise UserError(f"MLPerf scores {benchmark} over exactly {needed} runs (olympic mean); got {len(runs)}", fix)
    return logs, benchmark, entry


def _write_atomically(out: Path, write) -> None:
    """``write(folder)`` into a fresh sibling of ``out``, renamed to ``out`` once whole: an
    error half-way leaves nothing at ``out``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))  # ours alone
    try:
        write(partial)
        if out.exists():
            out.rmdir()  # empty (checked before anything was read)
        partial.rename(out)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def _write_tree(out: Path, runs: list[tuple[Path, dict]], logs: list[str], benchmark: str, entry: str,
                submission: SubmissionConfig) -> None:
    system = system_id(submission.platform)
    description = system_description_for(runs[0][0], submission)
    description["system_name"] = submission.platform
    (out / "systems").mkdir()
    (out / "systems" / f"{system}.json").write_text(json.dumps(description, indent=2) + "\n")
    folder = out / "results" / system / benchmark
    folder.mkdir(parents=True)
    for i, log in enumerate(logs):
        (folder / f"result_{i}.txt").write_text(log)
    _copy_entry_code(entry, runs[0][1], out / "benchmarks" / benchmark / "implementations" / entry)


FINDINGS = 8  # lines of the checker's output shown


def package_check(out: Path, ruleset: str) -> PackageCheck:
    """MLPerf's own package checker on the tree (``mlperf_logging.package_checker``), its whole
    output in ``<out>.package-checker.log`` beside the tree."""
    log = out.parent / f"{out.name}.package-checker.log"
    proc = subprocess.run([sys.executable, "-m", "mlperf_logging.package_checker", str(out), "training", ruleset,
                           "--log_output", str(log)], capture_output=True, text=True, cwd=out.parent)
    text = (proc.stdout + proc.stderr).strip()
    if not log.is_file() or not log.read_text().strip():
        log.write_text(text + "\n")
    ok = "PACKAGE CHECKER FOUND NO ERRORS, SUCCESS" in text
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    # Its findings: each distinct error or warning line (a rule broken in all five logs is said once).
    said = [line for line in lines if "ERROR" in line or "WARNING" in line or "failed" in line.lower()]
    findings = list(dict.fromkeys(said or lines))
    return PackageCheck(ok, [] if ok else findings[-FINDINGS:], log)
