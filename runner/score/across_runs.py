"""Runs that must be independent: a shipped network does not change with the seed.

A network trained from a runner-drawn seed differs from run to run: in every byte of its
weights, in the mistakes it makes, and in its filters once its hidden units are aligned. A
network carried into the run (in code, a wheel, the builder), even jittered per seed or
only as a starting point, keeps much of itself across seeds. Each pair of runs of one
reproduction with different seeds is compared on the crossing checkpoints the runner copied:

- identical checkpoint digests;
- *in what they get wrong*: the Jaccard of their mistakes (item and wrong answer, clean set
  and probe, against the runner's labels). A Jaccard on few mistakes is noisy, so a pair is
  judged on the lower bound of a Wilson interval (``Z`` standard errors) against the task's
  limit, and the set on its pooled counts (every pair's shared and all mistakes summed);
  models that make fewer than ``MIN_MISTAKES`` mistakes between them are not judged;
- *in their weights*: the correlation of their tensors after aligning hidden units
  (``runner.score.aligned_weights``), overall and per layer, against the task's limit.
  The tensors are the evaluator's copy of the crossing checkpoint, trusted only when its
  bytes are the checkpoint's (``runner.score.weights_dump``).

The limits are the task's (``Task.cross_seed``), set from measured honest pairs kept in the
task's folder. A pair over a limit marks both runs non-conforming (class 4, the figures
named). Each run is also compared with the signing key's earlier signed runs of the entry
(``Earlier``, from the key's ledger: a claim cannot be the one of many invocations that
happened to differ); a pair over a limit marks the new run. Every run's result records what
was compared (``training.cross_seed``, ``earlier`` for those): a single run, or runs with the
auditor's seeds, say the cross-seed checks were not possible or not enough for a claim
(``REQUIRED_RUNS`` runs with seeds the runner drew).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

import numpy as np

from runner.claims import REQUIRED_RUNS
from runner.digests import sha256_file
from runner.results.record import Result
from runner.score.aligned_weights import compare
from runner.score.model_origin import CLASS4
from runner.score.probe import probe_subset
from runner.safe_npy import load_npy
from runner.score.weights_dump import FORGED, read_checked

MIN_MISTAKES = 20
Z = 2.33  # one-sided 1 %: a pair or set is over the limit only when its lower bound is


@dataclass(frozen=True)
class Crossing:
    run_id: str
    seed: int
    sha256: str | None
    clean: np.ndarray | None
    probe: np.ndarray | None
    probe_items: int | None = None  # the probe's items, drawn by probe_seed (None: all of them)
    probe_seed: int | None = None
    weights: list | None = None  # [(name, array)] of the crossing checkpoint, when trusted
    weights_problem: str | None = None  # why there are none


def _crossing_weights(folder: Path, result, index: int, sha256: str | None) -> tuple[list | None, str | None]:
    sensitivity = ((result.training.model_origin or {}).get("sensitivity") or [])
    record = next((r.get("weights") for r in sensitivity if isinstance(r, dict) and r.get("of") == "crossing"), None)
    kept = sorted((folder / "checkpoints").glob(f"{index}.*")) + sorted((folder / "checkpoints").glob(f"{index}"))
    if not kept or sha256_file(kept[0]) != sha256:
        return None, "the runner's copy of the crossing checkpoint is not in the result"
    return read_checked(folder, record, kept[0])


def crossing_of(folder: Path, result, weights: bool = True) -> Crossing | None:
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

    tensors, problem = _crossing_weights(folder, result, t.crossing, ev.get("checkpoint_sha256")) if weights else (None, None)
    return Crossing(result.run_id, result.seed, ev.get("checkpoint_sha256"), load(ev.get("predictions")),
                    load(ev.get("probe_predictions")), ev.get("probe_items"), ev.get("probe_seed"),
                    tensors, problem)


def mistakes(c: Crossing, labels) -> set[tuple[str, int, int]] | None:
    """``(set, item, answer)`` for every item the model got wrong (top-1), clean and probe."""
    truth = np.asarray(labels).reshape(-1) if labels is not None else None
    if truth is None or truth.dtype.kind not in "iu" or c.clean is None:
        return None
    found: set[tuple[str, int, int]] = set()

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


def lower_bound(shared: int, union: int, z: float = Z) -> float:
    """The Wilson score interval's lower end for ``shared`` of ``union``."""
    if union <= 0:
        return 0.0
    p = shared / union
    centre = p + z * z / (2 * union)
    spread = z * math.sqrt(p * (1 - p) / union + z * z / (4 * union * union))
    return max(0.0, (centre - spread) / (1 + z * z / union))


@dataclass
class Pair:
    a: Crossing
    b: Crossing
    shared: int | None = None
    union: int | None = None
    weights: dict | None = None  # aligned_weights.WeightsComparison.to_dict()
    findings: list[str] = field(default_factory=list)

    @property
    def jaccard(self) -> float | None:
        return self.shared / self.union if self.union and self.shared is not None else None

    def record(self, other: Crossing) -> dict:
        mistakes = None if self.union is None or self.shared is None else {
            "shared": self.shared, "union": self.union, "jaccard": round(self.jaccard or 0.0, 6),
            "bound": round(lower_bound(self.shared, self.union), 6)}
        return {"with": other.run_id, "seed": other.seed, "mistakes": mistakes, "weights": self.weights,
                "findings": self.findings}


def _names(p: Pair) -> str:
    return f"runs {p.a.run_id} and {p.b.run_id} (seeds {p.a.seed} and {p.b.seed})"


def judge_pair(a: Crossing, b: Crossing, labels, limits, framework: str) -> Pair:
    """Both checks of one pair of runs with different seeds."""
    pair = Pair(a, b)
    if a.seed == b.seed:
        return pair  # an auditor's repeat of one seed may well give the same network
    if a.sha256 and a.sha256 == b.sha256:
        pair.findings.append(f"the crossing checkpoints of runs {a.run_id} and {b.run_id} are identical across seeds "
                             f"{a.seed} and {b.seed} (sha256 {a.sha256[:16]})")
    ma, mb = mistakes(a, labels), mistakes(b, labels)
    if ma is not None and mb is not None:
        pair.shared, pair.union = len(ma & mb), len(ma | mb)
        bound = lower_bound(pair.shared, pair.union)
        if pair.union >= MIN_MISTAKES and bound >= limits.mistakes:
            pair.findings.append(
                f"the crossing models of {_names(pair)} share {pair.jaccard:.1%} of their {pair.union} mistakes "
                f"(item and wrong answer, clean and probe; at least {bound:.1%} at {Z:g} standard errors; "
                f"limit {limits.mistakes:.0%}, honest pairs in {limits.evidence or 'the task'})")
    if a.weights is not None and b.weights is not None:
        found = compare(a.weights, b.weights, framework, limits.public_width)
        pair.weights = found.to_dict()
        top = found.highest
        if found.overall is not None and (found.overall >= limits.weights or (top and top.similarity >= limits.weights)):
            pair.findings.append(
                f"the crossing checkpoints of {_names(pair)} are alike in their aligned weights (hidden units "
                f"matched layer by layer): correlation {found.overall:.2f} overall"
                + (f", {top.similarity:.2f} in {top.name} {list(top.shape)}" if top else "")
                + f" (limit {limits.weights:g}; honest pairs in {limits.evidence or 'the task'}): "
                f"they share a starting point")
    return pair


def judge_set(pairs: list[Pair], limits) -> str | None:
    """The runs together: their pooled mistakes over the limit (the median pair with them)."""
    # (each pair, its shared mistakes, all its mistakes): judge_pair sets the two counts together
    counted = [(p, p.shared, p.union) for p in pairs if p.union and p.shared is not None]
    if len(counted) < 2:
        return None
    shared, union = sum(s for _, s, _ in counted), sum(u for _, _, u in counted)
    median = statistics.median(s / u for _, s, u in counted)  # each pair's jaccard
    bound = lower_bound(shared, union)
    if union >= MIN_MISTAKES and median >= limits.mistakes and bound >= limits.mistakes:
        runs = sorted({p.a.run_id for p, _, _ in counted} | {p.b.run_id for p, _, _ in counted})
        return (f"the crossing models of runs {', '.join(runs)} "
                f"share {shared / union:.1%} of their mistakes pooled over {len(counted)} pairs (median pair {median:.1%}; "
                f"at least {bound:.1%} at {Z:g} standard errors; limit {limits.mistakes:.0%})")
    return None


def forged(c: Crossing) -> bool:
    """The run's copy of its crossing tensors is not its checkpoint's bytes."""
    return bool(c.weights_problem and c.weights_problem.startswith(FORGED))


def not_checked(runs: int, seeds_drawn: bool) -> str | None:
    """Why the runs' cross-seed checks do not count for a claim; None when they do."""
    if runs < 2:
        return "not possible: a single run (a claim needs at least 3 runs with seeds the runner draws)"
    if runs < REQUIRED_RUNS:
        return f"{runs} runs: fewer than the {REQUIRED_RUNS} a claim needs"
    if not seeds_drawn:
        return "the seeds were the auditor's (--seed), not drawn by the runner"
    return None


def summary_line(records: list[dict]) -> str:
    """One line for ``runner reproduce``: what the runs' cross-seed checks found, or why
    there were none."""
    first = records[0]
    pairs = {tuple(sorted((r["run"], p["with"]))): p for r in records for p in r["pairs"]}
    jaccards = [p["mistakes"]["jaccard"] for p in pairs.values() if p.get("mistakes")]
    weights = [p["weights"]["overall"] for p in pairs.values() if (p.get("weights") or {}).get("overall") is not None]
    limits = first["limits"]

    def span(values):
        return f"{min(values):.2f}-{max(values):.2f}" if values else "not compared"

    line = (f"cross-seed checks, {first['runs']} run(s): mistakes shared {span(jaccards)} (limit {limits['mistakes']:g}), "
            f"aligned weights {span(weights)} (limit {limits['weights']:g})")
    problems = sorted({r["weights_problem"] for r in records if r.get("weights_problem")})
    if problems:
        line += f"; weights: {problems[0]}"
    if (earlier := first.get("earlier")) is not None:
        compared = {p["with"] for r in records for p in (r.get("earlier") or {}).get("compared", [])}
        line += f"; with {len(compared)} earlier signed run(s) of this key"
        line += f" ({len(earlier['skipped'])} left out)" if earlier["skipped"] else ""
    return line + (f"; {first['why_not']}" if first["why_not"] else "")


@dataclass(frozen=True)
class Earlier:
    """The signing key's earlier runs of the entry (``runner.keys.ledger.earlier_runs``): their
    folders, newest first, and why others were left out. Each run of this reproduction is also
    compared with them; what a pair finds marks this run only (the earlier one is signed)."""

    folders: tuple[Path, ...] = ()
    skipped: tuple[str, ...] = ()


def _crossings(folders, weights: bool, results: Mapping[Path, Result] | None = None) -> list[tuple[Path, Crossing]]:
    found = []
    for folder in folders:
        try:
            result = results[folder] if results is not None and folder in results else Result.read(folder)
        except (OSError, ValueError):
            continue
        if (c := crossing_of(folder, result, weights)) is not None:
            found.append((folder, c))
    return found


def across_runs(folders: list[Path], labels, task, framework: str, seeds_drawn: bool,
                earlier: Earlier = Earlier(), results: Mapping[Path, Result] | None = None,
                ) -> dict[Path, tuple[dict, list[str]]]:
    """For each run folder: (its ``training.cross_seed`` record, its class 4 reasons).
    ``results``: the runs' records before they are written (a reproduction's own runs)."""
    crossings = _crossings(folders, len(folders) > 1 or bool(earlier.folders), results)
    before = [(f, c) for f, c in _crossings(earlier.folders, True) if c.run_id not in {x.run_id for _, x in crossings}]
    limits = task.cross_seed
    pairs = [(fa, fb, judge_pair(a, b, labels, limits, framework))
             for (fa, a), (fb, b) in combinations(crossings, 2) if a.seed != b.seed]
    with_earlier = [(fa, judge_pair(a, b, labels, limits, framework))
                    for fa, a in crossings for _, b in before if a.seed != b.seed]
    reasons: dict[Path, list[str]] = {f: [CLASS4 + c.weights_problem] if c.weights_problem and forged(c) else [] for f, c in crossings}
    for fa, fb, pair in pairs:
        for folder in (fa, fb):
            reasons[folder] += [CLASS4 + f for f in pair.findings]
    for folder, pair in with_earlier:
        reasons[folder] += [CLASS4 + f for f in pair.findings]
    if together := judge_set([p for _, _, p in pairs], limits):
        for folder in reasons:
            reasons[folder].append(CLASS4 + together)
    seeds = {c.seed for _, c in crossings}
    why = not_checked(len(seeds), seeds_drawn)
    found = {}
    for folder, c in crossings:
        own = [(p, p.b if fa == folder else p.a) for fa, fb, p in pairs if folder in (fa, fb)]
        record = {"run": c.run_id, "runs": len(seeds), "seeds_drawn": seeds_drawn, "checked": why is None, "why_not": why,
                  "limits": {"mistakes": limits.mistakes, "weights": limits.weights, "evidence": limits.evidence,
                             "z": Z, "min_mistakes": MIN_MISTAKES},
                  "weights_problem": c.weights_problem, "set": together,
                  "pairs": [p.record(other) for p, other in own]}
        if earlier.folders or earlier.skipped:
            record["earlier"] = {"compared": [p.record(p.b) for f, p in with_earlier if f == folder],
                                 "skipped": list(earlier.skipped)}
        found[folder] = (record, reasons[folder])
    return found


def alike_runs(folders: list[Path], labels, task, framework: str) -> dict[Path, list[str]]:
    """For each run folder, the class 4 reasons its crossing model is another run's
    (``labels``: the evaluation labels the runs were scored against)."""
    return {f: reasons for f, (_, reasons) in across_runs(folders, labels, task, framework, True).items() if reasons}
