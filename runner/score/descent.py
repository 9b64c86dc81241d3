"""Does the scored model descend from the initial weights the runner drew? (class 4, issue 44)

Every run starts from weights the runner drew from its seed (``runner.run.init_weights``).
Training moves them, but keeps each unit in place: measured on the default entry, every
weight tensor of the crossing checkpoint keeps a cosine similarity of 0.63-0.89 with its own
initial value after 1 to 3 epochs (``runner/tasks/*/calibration.md``). A network trained
elsewhere, loaded over the runner's start or written by the entry's code, is unrelated to it:
its cosine with the drawn values is noise, about ``N(0, 1/n)`` for a tensor of ``n`` elements.

So, for the crossing checkpoint and the final model (the evaluator's copy of their tensors,
checked against the checkpoint's bytes, ``runner.score.weights_dump``), per tensor drawn at
random (``init_weights.DRAWN``): the cosine similarity with its initial value and the distance
travelled (``|W - W0| / |W0|``). A tensor is judged alone when it is large enough for the
limit to stand ``NOISE_Z`` standard errors above chance (``n >= (NOISE_Z / limit)^2``) and is
not the model's last weight (the classes' layer, ``output_layer``); every drawn tensor counts
in the size-weighted overall figure. Below the task's limit
(``Task.descent``) the model is non-conforming, class 4, the tensors named. A tensor missing
from the checkpoint, or of another shape, is a finding too: the model is not the one the
runner's start was drawn for.

What this does not see: a network added onto the runner's start (``W0 + c * W``) keeps a
cosine above any limit honest training allows when ``c`` is small; such a start is shared by
every run of the entry, and the cross-seed comparison of weights sees that
(``runner.score.across_runs``), also against the key's earlier runs.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from runner.initial_weights import DRAWN, Tensor, draw
from runner.score.weights_dump import as_float, in_order, load_dump, read_checked

NOISE_Z = 4.0
MAX_NAMED = 5
EXTRA_ELEMENTS = 1024  # float elements a model may hold beyond the tensors the runner drew for


def judged_alone(elements: int, limit: float) -> bool:
    """A tensor large enough that chance stays ``NOISE_Z`` standard errors under the limit."""
    return limit > 0 and elements >= (NOISE_Z / limit) ** 2


def cosine(a: np.ndarray, b: np.ndarray) -> float | None:
    a64, b64 = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    na, nb = float(np.linalg.norm(a64)), float(np.linalg.norm(b64))
    if na == 0 or nb == 0 or not (math.isfinite(na) and math.isfinite(nb)):
        return None
    return float(a64 @ b64) / (na * nb)


def measure(tensors: list[tuple[str, np.ndarray]], initial: dict[str, np.ndarray], drawn: list[str],
            limit: float, listed: set[str] | None = None, overall_only: frozenset[str] = frozenset()) -> dict:
    """The per-tensor figures and the finding (``problem``) for one model. ``listed``: every
    tensor the runner drew for (whatever its role); a float tensor of the model beyond them
    (a layer the builder's model does not have: a Keras file carries its own architecture) is
    named when it holds more than ``EXTRA_ELEMENTS``."""
    found = dict(tensors)
    extra = [(name, value.size) for name, value in tensors if listed is not None and name not in listed]
    rows: list[dict] = []
    missing: list[str] = []
    below: list[tuple[str, float | None]] = []  # (name, cosine) of each tensor under the limit
    weighted = total = 0.0
    for name in drawn:
        w0 = initial[name]
        w = found.get(name)
        if w is None or tuple(w.shape) != tuple(w0.shape):
            missing.append(name)
            continue
        c = cosine(w, w0)
        distance = float(np.linalg.norm((w.astype(np.float64) - w0).ravel()) / max(float(np.linalg.norm(w0.ravel())), 1e-30))
        alone = judged_alone(w0.size, limit) and name not in overall_only
        shown = None if c is None else round(c, 4)
        rows.append({"name": name, "elements": int(w0.size), "cosine": shown,
                     "distance": round(distance, 4) if math.isfinite(distance) else None, "judged": alone})
        weighted += (c if c is not None else 0.0) * w0.size
        total += w0.size
        if alone and (c is None or c < limit):
            below.append((name, shown))
    overall = weighted / total if total else None
    problem = None
    if missing:
        more = f" and {len(missing) - MAX_NAMED} more" if len(missing) > MAX_NAMED else ""
        problem = (f"tensors the runner drew initial values for are not in the model: "
                   f"{', '.join(missing[:MAX_NAMED])}{more}")
    elif (extra_size := sum(size for _, size in extra)) > EXTRA_ELEMENTS:
        named = ", ".join(f"{name} ({size:,})" for name, size in sorted(extra, key=lambda e: -e[1])[:MAX_NAMED])
        problem = (f"it computes with tensors the runner drew no initial value for ({extra_size:,} elements, "
                   f"at most {EXTRA_ELEMENTS:,}): {named}")
    elif below or (overall is not None and overall < limit):
        named = ", ".join(f"{name} ({cosine})" for name, cosine in sorted(below, key=lambda b: b[1] or 0)[:MAX_NAMED])
        more = f" and {len(below) - MAX_NAMED} more" if len(below) > MAX_NAMED else ""
        problem = (f"it does not descend from the initial weights the runner drew: cosine similarity with them "
                   f"{named or 'overall'}{more}; overall {overall:.3f}, limit {limit:g}")
    return {"overall": None if overall is None else round(overall, 4), "limit": limit, "tensors": rows,
            "missing": missing[:50], "extra": [name for name, _ in extra][:50], "problem": problem}


def judge(result_dir: Path, initial: dict[str, np.ndarray], drawn: list[str], limit: float,
          dumps: list[tuple[str, str, dict | None, Path | None]], listed: set[str] | None = None,
          overall_only: frozenset[str] = frozenset()) -> tuple[dict, list[str]]:
    """``dumps``: (key, what, the evaluator's weights record, the checkpoint copy it must
    match, or None to read it as signed). Returns the record and the class 4 findings."""
    record: dict = {"limit": limit, "models": {}}
    problems = []
    for key, what, weights, checkpoint in dumps:
        tensors, why = (read_checked(result_dir, weights, checkpoint) if checkpoint is not None
                        else read_signed(result_dir, weights))
        if tensors is None:
            record["models"][key] = {"problem": None, "not_measured": why}
            if why and why.startswith("the evaluator's copy"):
                problems.append(f"the descent of {what} could not be measured: {why}")
            continue
        measured = measure(tensors, initial, drawn, limit, listed, overall_only)
        record["models"][key] = measured
        if measured["problem"]:
            problems.append(f"{what}: {measured['problem']}")
    return record, problems


def read_signed(result_dir: Path, weights: dict | None):
    """The tensors of a dump as the signed result holds it (its checkpoint copy is gone)."""
    if not isinstance(weights, dict) or "index" not in weights:
        return None, "the evaluator wrote no copy of the model's tensors"
    try:
        tensors = load_dump(result_dir, weights)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return None, f"the evaluator's copy of the tensors is unreadable: {str(exc)[:160]}"
    return [(name, as_float(in_order(array, axes), dtype)) for name, array, dtype, axes in tensors], None


def checkpoint_copy(result_dir: Path, stem: str) -> Path | None:
    """The runner's copy of a checkpoint (``checkpoints/<stem>.<suffix>``), if kept."""
    kept = sorted((result_dir / "checkpoints").glob(f"{stem}.*")) + sorted((result_dir / "checkpoints").glob(stem))
    return kept[0] if kept else None


def descent_of_run(result_dir: Path, initial: list[Tensor], seed: int, framework: str, limit: float,
                   sensitivity: list[dict], crossing: int | None, signed: bool = False) -> tuple[dict, list[str]]:
    """The descent of the run's crossing checkpoint and final model from the initial weights
    drawn for it (``initial``, ``seed``): drawn again here, never read from a file. ``signed``:
    read the dumps as a signed result holds them (``runner verify``), the crossing's still
    checked against its kept checkpoint."""
    values = draw([t for t in initial if t.role in DRAWN], seed, framework)
    drawn = [t.name for t in initial if t.role in DRAWN]
    dumps = []
    for r in sensitivity:
        if not isinstance(r, dict) or r.get("of") not in ("crossing", "final"):
            continue
        if r["of"] == "crossing":
            if crossing is None:
                continue
            what, copy = f"checkpoint {crossing}", checkpoint_copy(result_dir, str(crossing))
        else:
            what, copy = "the final model", None if signed else checkpoint_copy(result_dir, "final")
        if copy is None and not signed:
            continue
        dumps.append((r["of"], what, r.get("weights"), copy))
    return judge(result_dir, values, drawn, limit, dumps, {t.name for t in initial}, output_layer(initial))


def output_layer(initial: list[Tensor]) -> frozenset[str]:
    """The model's last drawn weight (the classes' layer of a classifier): counted overall
    only. It starts small and grows many times its start (resnet9-v100's moves 1.2 times its
    norm in three smoke steps), so it travels furthest from the draw in honest runs, and it
    holds no features: a shipped network needs the layers before it, which are judged."""
    weights = [t.name for t in initial if t.role in DRAWN and len(t.shape) >= 2]
    return frozenset(weights[-1:])
