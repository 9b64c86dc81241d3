"""The leaderboard as JSON (``runner leaderboard --json``): every table's rows with the raw
figures (seconds, dollars, milliseconds; not DAWNBench's rounded text), the claim and the
reproduction each row pairs (full run ids, where they were read from), and every
reproduction with why it does or does not count."""

from __future__ import annotations

from dataclasses import asdict

from runner.leaderboard import Leaderboard
from runner.leaderboard.reproductions import Reproduction
from runner.leaderboard.tables import Row, Table


def _reproduction(r: Reproduction) -> dict:
    rec = r.record
    return {"run_id": rec.run_id, "entry": rec.entry, "origin": r.origin, **r.verdict.to_dict(),
            "smoke": rec.smoke, "status": rec.status,
            "conforming": rec.conforming, "tta_seconds": rec.tta_seconds, "profile": rec.profile,
            "ledger": rec.ledger, "rules_version": rec.rules_version}


def _row(row: Row) -> dict:
    return {"rank": row.rank, "claimed": row.claimed, "reproduced": row.reproduced, "ratio": row.ratio,
            "model": row.model, "team": row.team, "hardware": row.hardware, "framework": row.framework,
            "date": row.date, "not_compared": row.not_compared or None, "ledger": row.ledger or None, "rules": row.rules or None,
            "spread": None if row.spread is None else asdict(row.spread),
            "claim": None if row.claim is None else {"name": row.claim.name, "source": row.claim.source},
            "reproduction": None if row.reproduction is None else {
                "run_id": row.reproduction.record.run_id, "verdict": row.reproduction.verdict.word,
                "reason": row.reproduction.reason}}


def _table(table: Table) -> dict:
    return {"id": table.id, "task": table.task.task_id, "title": table.title, "column": table.column,
            "criterion": table.criterion, "objective": table.objective.id, "rows": [_row(r) for r in table.rows]}


def board_dict(board: Leaderboard, tables: list[Table]) -> dict:
    return {"tables": [_table(t) for t in tables],
            "reproductions": [_reproduction(r) for r in board.reproductions],
            "studies": [{"entry": s.entry, "name": s.name, "kind": s.kind, "written_at": s.written_at,
                         "runs": list(s.runs)} for s in board.studies],
            "skipped": list(board.skipped)}
