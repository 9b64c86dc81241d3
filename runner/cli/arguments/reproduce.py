"""``runner reproduce``'s arguments."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from runner.cli import argtypes
from runner.cli.arguments import slurm

DESCRIPTION = ("Build ENTRY's image, run training then inference inside it, keep the "
               "clock and the score on the host, fingerprint the hardware and write a signed result.")

MAX_CALM_SECONDS = 7 * 24 * 3600


def calm_seconds(text: str) -> float:
    """``--calm-timeout``: seconds, 0 (never wait: a busy host stops the command at once) to a week."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number of seconds") from None
    if not math.isfinite(value) or not 0 <= value <= MAX_CALM_SECONDS:
        raise argparse.ArgumentTypeError(f"{text[:40]} seconds: give 0 to {MAX_CALM_SECONDS}")
    return value


def register(p) -> None:
    p.add_argument("entry", help="entry folder, e.g. entries/mnist-cnn-cpu")
    p.add_argument("--runs", type=argtypes.run_count, help="repeat with seeds seed, seed+1, ... (default: manifest)")
    p.add_argument("--seed", type=argtypes.seed,
                   help="first seed, the auditor's to fix (default: the runner draws one at random)")
    p.add_argument("--smoke", action="store_true",
                   help="one short epoch on synthetic data, on CPU; never conforming")
    p.add_argument("--engine", choices=["docker", "podman", "charliecloud", "host"],
                   help="the engine for this command (default: RUNNER_ENGINE, else `runner setup --engine`'s); "
                        "host: this host's Python environment, no image, the result never counts")
    p.add_argument("--unsandboxed", action="store_true",
                   help="with --engine host on a host without bubblewrap: run the entry without a sandbox "
                        "(host network and files); the result says so")
    p.add_argument("--allow-hardware-mismatch", action="store_true",
                   help="run on a host that does not match the profile; marks the result non-conforming")
    p.add_argument("--allow-contended", action="store_true",
                   help="go on at once on a host busy on the run's cores (default: wait for it to calm down); "
                        "the contention check after training marks the run non-conforming if it stayed busy")
    p.add_argument("--calm-timeout", type=calm_seconds, metavar="SECONDS",
                   help="how long to wait for a busy host to calm down before the build and before each run's "
                        "training, then stop (default: RUNNER_CALM_TIMEOUT, else 600)")
    p.add_argument("--backend", action="append", metavar="B", type=argtypes.backend,
                   help="inference backend (repeatable; default: the manifest's)")
    p.add_argument("--timeout-minutes", type=argtypes.timeout_minutes, help="training timeout (default: manifest)")
    p.add_argument("--no-infer", action="store_true", help="skip the inference phase")
    p.add_argument("--full-curve", action="store_true",
                   help="evaluate every checkpoint, also after the crossing (default: stop evaluating there)")
    loadgen = p.add_mutually_exclusive_group()
    loadgen.add_argument("--no-loadgen", action="store_true",
                         help="skip LoadGen's SingleStream and Offline runs (the per-item latency pass stays)")
    loadgen.add_argument("--loadgen-mlperf", action="store_true",
                         help="run LoadGen with MLPerf Inference's minimums (600 s per scenario, SingleStream "
                              "1024 queries, Offline 24,576 samples), as a result claiming MLPerf compliance "
                              "needs (default: about a second per scenario beside the DAWNBench per-item figure)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="also print where each run's time went (its result's timings section)")
    p.add_argument("--json", action="store_true",
                   help="print the runs as JSON at the end (full run ids, folders); progress goes to stderr")
    argtypes.trusted_keys_argument(p)  # --json's "verified"
    p.add_argument("--no-sign", action="store_true",
                   help="leave the result unsigned (Slurm tasks: the submit host signs)")
    slurm.add_arguments(p)
    # A Slurm array task's run: the submitter's plan (runner.slurm.submit), with --seed.
    p.add_argument("--plan", type=Path, help=argparse.SUPPRESS)
