"""Runs that are too alike: a shipped network does not change with the seed.

A network trained from a runner-drawn seed differs from run to run: in every byte of its
weights, and in the mistakes it makes. Two honest runs of the default entry both miss
about sixty of MNIST's test items and a few dozen more of the shifted probe items, and
share only the hardest of those mistakes. A network carried into the run (in code, a
wheel, the builder) is the same in every run, or almost: the same checkpoint digest, or
the same mistakes (item and wrong answer) on the clean set and the probe. Each pair of
runs of one reproduction is compared on the crossing checkpoints the runner copied and
the predictions its evaluator made, against the runner's labels; a pair over the limit
marks both runs non-conforming (class 4), the figures named. Models that make fewer than
``MIN_MISTAKES`` mistakes between them are not judged: near-perfect models agree by force.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np

from runner.score.model_origin import CLASS4
from runner.score.safe_npy import load_npy

# Two runs whose mistakes (item, wrong answer; clean set and probe) are at least this
# much the same (shared / all, Jaccard) are the same network.
MAX_SHARED_MISTAKES = 0.9
MIN_MISTAKES = 20


@dataclass(frozen=True)
class Crossing:
    run_id: str
    seed: int
    sha256: str | None
    clean: np.ndarray | None
    probe: np.ndarray | None
    probe_items: int | None = None  # the probe's items, drawn by probe_seed (None: all of them)
    probe_seed: int | None = None


def crossing_of(folder: Path, result) -> Crossing | None:
    t = result.training
    if t is None or t.crossing is None or not (0 <= t.crossing < len(t.evaluations)):
        return None
    ev = t.evaluations[t.crossing]

    def load(relative):
        if not isinstance(relative, str):
            return None
        try:
            return np.asarray(load_npy(folder / relative))
        except (OSError, ValueError):
            return None

    return Crossing(result.run_id, result.seed, ev.get("checkpoint_sha256"), load(ev.get("predictions")),
                    load(ev.get("probe_predictions")), ev.get("probe_items"), ev.get("probe_seed"))


def mistakes(c: Crossing, labels) -> set[tuple[str, int, int]] | None:
    """``(set, item, answer)`` for every item the model got wrong (top-1), clean and probe."""
    truth = np.asarray(labels).reshape(-1) if labels is not None else None
    if truth is None or truth.dtype.kind not in "iu" or c.clean is None:
        return None
    found: set[tuple[str, int, int]] = set()
    from runner.score.probe import probe_subset

    for name, preds in (("clean", c.clean), ("probe", c.probe)):
        if preds is None:
            continue
        rows = probe_subset(len(truth), c.probe_items, c.probe_seed) if name == "probe" else None
        items = np.arange(len(truth)) if rows is None else np.asarray(rows)
        if len(preds) != len(items):
            return None
        top1 = preds.reshape(len(preds), -1)[:, 0]
        for k in np.nonzero(top1 != truth[items])[0]:  # by item number, whichever items the probe had
            found.add((name, int(items[k]), int(top1[k])))
    return found


def too_alike(a: Crossing, b: Crossing, labels) -> str | None:
    """Why two runs' crossing models are the same network; None when they are not."""
    if a.seed == b.seed:
        return None  # an auditor's repeat of one seed may well give the same network
    if a.sha256 and a.sha256 == b.sha256:
        return f"the crossing checkpoints of runs {a.run_id} and {b.run_id} are identical across seeds {a.seed} and {b.seed} (sha256 {a.sha256[:16]})"
    ma, mb = mistakes(a, labels), mistakes(b, labels)
    if ma is None or mb is None or len(ma | mb) < MIN_MISTAKES:
        return None
    shared = len(ma & mb) / len(ma | mb)
    if shared >= MAX_SHARED_MISTAKES:
        return (f"the crossing checkpoints of runs {a.run_id} and {b.run_id} are nearly identical across seeds "
                f"{a.seed} and {b.seed}: {shared:.1%} of their {len(ma | mb)} mistakes (item and wrong answer, "
                f"clean and probe) are the same (limit {MAX_SHARED_MISTAKES:.0%}; honest runs share their hardest few)")
    return None


def alike_runs(folders: list[Path], labels) -> dict[Path, list[str]]:
    """For each run folder, the class 4 reasons its crossing model is another run's
    (``labels``: the evaluation labels the runs were scored against)."""
    from runner.results.record import Result

    crossings = []
    for folder in folders:
        try:
            result = Result.read(folder)
        except (OSError, ValueError):
            continue
        if (c := crossing_of(folder, result)) is not None:
            crossings.append((folder, c))
    found: dict[Path, list[str]] = {}
    for (fa, a), (fb, b) in combinations(crossings, 2):
        if why := too_alike(a, b, labels):
            for folder in (fa, fb):
                found.setdefault(folder, []).append(CLASS4 + why)
    return found
