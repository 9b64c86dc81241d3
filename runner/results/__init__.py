"""Result folders: naming, writing ``result.json`` safely, and summarising repeated runs."""

from runner.results.folder import new_run_id, write_json
from runner.results.runs import RunsSummary, summarize_runs
from runner.results.schema import RESULT_SCHEMA, RESULT_SCHEMA_VERSION

__all__ = [
    "RESULT_SCHEMA", "RESULT_SCHEMA_VERSION", "RunsSummary", "new_run_id", "summarize_runs",
    "write_json",
]
