"""Result folders: naming, writing ``result.json`` safely, and summarising repeated runs."""

from runner.results.folder import new_run_id, write_json
from runner.results.runs import RunsSummary, summarize_runs

__all__ = ["RunsSummary", "new_run_id", "summarize_runs", "write_json"]

RESULT_SCHEMA_VERSION = 1
