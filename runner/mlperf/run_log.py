"""Write a run's MLPerf training log next to the entry's raw log: ``logs/mlperf_train.log``.

Called by ``runner reproduce`` after a run is scored and before its bundle is signed, so
the log is covered by the signature like every other file of the result folder.
"""

from __future__ import annotations

from pathlib import Path

from runner.errors import UserError
from runner.mlperf.config import SubmissionConfig, load_submission, set_command
from runner.mlperf.from_result import mlperf_run_from_result
from runner.mlperf.training_log import missing_submission_keys, render_training_log

LOG_NAME = "mlperf_train.log"


def write_mlperf_log(result_dir: Path, submission: SubmissionConfig | None = None,
                     result: dict | None = None) -> tuple[Path | None, str | None]:
    """``(path, note)``: the log and, when submission keys are not set, a note naming them (the
    log leaves them out; ``runner export mlperf`` requires them). ``(None, why)`` when nothing
    was scored, so a run never fails for want of MLPerf settings. ``result``: the run's record
    before it is written (a reproduction's); read from the folder otherwise."""
    submission = submission if submission is not None else load_submission()
    try:
        text = render_training_log(mlperf_run_from_result(result_dir, submission, result))
    except (UserError, ValueError) as err:  # nothing scored to log (e.g. every checkpoint was refused)
        return None, str(err)
    path = Path(result_dir) / "logs" / LOG_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    missing = missing_submission_keys(submission)
    if submission.get("division") == "closed":  # said, not changed: the log records the setting as made
        return path, ("it says division closed, but MLPerf's closed division takes only its reference workloads, "
                      "which no runner task is (docs/mlperf.md; `runner export mlperf` refuses it). "
                      f"Fix: {set_command('division', 'open')}")
    if not missing:
        return path, None
    return path, (f"it leaves out the submission keys not set ({', '.join(missing)}), which MLPerf's "
                  f"checker needs. Fix: {set_command(missing[0])}" + (" (and the others)" if missing[1:] else ""))
