"""The runs a study reads, read as the untrusted input they are (``runner.safe_read``).

A study's runs may come from a shared or downloaded results folder (``--from-runs``) or from
a Slurm task that died: a ``result.json`` may be truncated, nested 200,000 deep, a FIFO, or
missing. ``read_run`` reads one as a ``Result`` or refuses it in one line (``Unreadable``);
``readable_runs`` keeps the runs it can read and says why it left out each other one.
"""

from __future__ import annotations

from pathlib import Path

from runner.errors import UserError
from runner.results.record import Result
from runner.safe_read import Unreadable, read_json_object, visible

RESULT_FILE = "result.json"


def read_run(folder: Path | str) -> Result:
    """The run in ``folder``; ``Unreadable`` (one line naming the file and why) otherwise."""
    path = Path(folder) / RESULT_FILE
    data = read_json_object(path, "result")
    try:
        return Result.from_dict(data)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise Unreadable(path, f"is not a run's record ({visible(str(exc))[:160]})") from None


def why_unreadable(err: UserError) -> str:
    """The one line an unreadable run is listed with."""
    return err.problem


def readable_runs(folders: list[Path]) -> tuple[list[Path], list[dict]]:
    """(the folders whose run can be read, ``{"run_id", "folder", "problem"}`` for each other)."""
    kept, left = [], []
    for folder in folders:
        try:
            read_run(folder)
        except UserError as err:
            left.append({"run_id": Path(folder).name, "folder": str(folder), "problem": why_unreadable(err)})
            continue
        kept.append(Path(folder))
    return kept, left
