"""Did each backend time the model that was scored? (threat-model classes 5 and 2.)

The check runs after every inference phase: the pipeline's (``runner reproduce``) and a
re-run of it on an existing result (``runner reinfer``, ``runner.reinference``). It lives
here, below both, because only the command line, studies and benchmarks may import the
pipeline module (``runner.reproduce``; see tests/test_architecture.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from runner.results.inference import BackendRun, as_dicts
from runner.score.evaluations import ScoredEvaluation, backend_predictions_name, load_predictions
from runner.score.model_origin import predict_time_problems, timed_disagreement, timed_model_problem
from runner.tasks import get_task

if TYPE_CHECKING:
    from runner.results.record import Result


@dataclass
class TimedModelCheck:
    """What the checks found: the evaluations' predict times against the timed pass (for
    ``training.model_origin.predict_seconds``), each backend's disagreement with the scored
    final model, and the problems that make the result non-conforming."""

    predict_seconds: dict | None = None
    disagreements: dict[str, float | None] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def check_timed_model(result: Result, inference: dict[str, BackendRun], result_dir: Path) -> TimedModelCheck:
    """Each backend timed the model the evaluator scored as the final model (class 5), and
    no evaluation up to the crossing took longer to predict than that model's own batch-1
    pass over the same items (class 2: work in evaluation time, off the clock). Reads only."""
    check = TimedModelCheck()
    t = result.training
    if t is not None and t.model_origin is not None and t.evaluations:
        scored = [ScoredEvaluation(**e) for e in t.evaluations]
        check.predict_seconds, problems = predict_time_problems(scored, t.crossing, as_dicts(inference),
                                                                result.task.eval_size)
        check.problems += problems
    final = t.final_model if t else None
    if not final or not isinstance(final.get("predictions"), str):
        if any(not rec.error for rec in inference.values()):
            why = (final or {}).get("problem") or (final or {}).get("deferred") or "the run recorded no final model"
            check.problems.append(f"class 5 (a different model at the end): the runner did not evaluate the final "
                                  f"model ({why}): nothing shows the timed model is the one it scored")
        return check
    name = backend_predictions_name(get_task(result.task.id))
    try:
        evaluated = load_predictions(result_dir / final["predictions"])
    except (OSError, ValueError):
        return check
    for backend in sorted(inference):
        try:
            timed = load_predictions(result_dir / "inference" / backend / name)
        except (OSError, ValueError):
            continue
        check.disagreements[backend] = disagreement = timed_disagreement(timed, evaluated)
        if problem := timed_model_problem(backend, disagreement):
            check.problems.append(problem)
    return check
