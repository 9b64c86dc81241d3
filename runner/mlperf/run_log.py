"""Write a run's MLPerf training log next to the entry's raw log: ``logs/mlperf_train.log``.

Called by ``runner reproduce`` after a run is scored and before its bundle is signed, so
the log is covered by the signature like every other file of the result folder.
"""

from __future__ import annotations

from pathlib import Path

from runner.errors import UserError
from runner.mlperf.config import SubmissionConfig, load_submission
from runner.mlperf.from_result import mlperf_run_from_result
from runner.mlperf.training_log import render_training_log

LOG_NAME = "mlperf_train.log"


def write_mlperf_log(result_dir: Path, submission: SubmissionConfig | None = None) -> tuple[Path | None, str | None]:
    """``(path, None)`` when written; ``(None, why)`` when it cannot be (settings missing,
    nothing scored), so a run never fails for want of MLPerf settings."""
    try:
        run = mlperf_run_from_result(result_dir, submission if submission is not None else load_submission())
        text = render_training_log(run)
    except UserError as err:
        return None, str(err)
    except ValueError as err:  # nothing scored to log (e.g. every checkpoint was refused)
        return None, str(err)
    path = Path(result_dir) / "logs" / LOG_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path, None
