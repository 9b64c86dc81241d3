"""The harness sandbox, for the studies: ``runner.run.sandbox`` (the run's own stages use it too)."""

from runner.run.sandbox import HARNESS_MOUNT, HarnessJob, harness_limits, run_harness, threads_of

__all__ = ["HARNESS_MOUNT", "HarnessJob", "harness_limits", "run_harness", "threads_of"]
