"""Evidence of training (threat-model class 4f): did the run do at least the work of looking
at its training set once before its scored model crossed the threshold?

A network trained elsewhere can be carried in as ordinary text, rebuilt into a real
checkpoint by ``train.py`` and handed in for evaluation at once: it passes provenance (every
tensor is the checkpoint's) and sensitivity (it falls to chance permuted), and it crosses
after interpreter start-up alone. Whatever its disguise, it skips what every honest run
does: pass the training set through the model. So the runner weighs two figures it
measures itself, on this host, for the crossing checkpoint:

- **the work done**: the CPU time the training containers used up to the crossing's
  freeze, from their cgroups' accounting (``runner.run.cpu_usage``: every process and
  thread of the containers, start-up included; this host's ranks summed), recorded by the
  runner in its own ``eval_freeze`` event (``cpu_seconds``), which the entry cannot write;
- **one forward pass over the training set**: the evaluator predicted the crossing
  checkpoint's clean set and probe in batches of ``BATCH`` (500); the CPU time its
  container used from ``model_built`` to the answer (``predict_cpu_seconds``, its cgroup,
  so every thread it ran counts) over the items it predicted is the model's cost per item,
  times the training set's items (the staged set the run trained on: the smoke set in a
  smoke run).

A crossing whose work is below ``FRACTION`` (1.5) forward passes is non-conforming, class
4, "no evidence of training", with both figures. Why 1.5: one epoch of the default entry
costs about two of the evaluator's passes (2.4 s on two threads, 4.8 CPU-seconds, against
about 2.5 for the evaluator's pass over 60,000 items, whose provenance ledger watches every
operator), and it crosses at the end of its second epoch: about 11-12 CPU-seconds with
start-up, 4.5 passes on a quiet host, three times the floor. A shipped network written out
at once costs interpreter start-up only: python and numpy 0.2 CPU-seconds; torch's import
1.5-2.0 more (measured in the default entry's image), which is about one quiet forward pass
of a small MNIST CNN over 60,000 items: a floor of one pass would let a torch-importing fake
through, 1.5 does not.

Measured on the 2-core AMD EPYC (Zen 5) host, 2026-11-24, shared with three other
sessions (load 2-10; ``runner reproduce`` prints the figures, ``training.evidence`` keeps
them):

==========================  ==============  ======================  =====
run                         CPU-s to cross  forward pass (CPU-s)    ratio
==========================  ==============  ======================  =====
cheat-no-training (seed 5)  0.22            15.76 (60,000 items)    0.01
==========================  ==============  ======================  =====

The evaluator predicted the fake's 12,000 items (clean and probe) in 3.15 CPU-seconds on a
host at load 8; the same model's 12,000 items took 1.31 CPU-seconds single-threaded in its
image at load 3 (the default entry's 174k-weight CNN: 1.33), and about 0.5 quiet (the
default entry's 10,000 items predict in 0.17-0.22 s on two threads): a busy host raises the
floor, never lowers it. An epoch of the default entry took 245 CPU-seconds at load 10 (two
OpenMP threads spinning on two oversubscribed cores, against 4.8 quiet): contention raises
an honest run's work as much (and the contention check names such a run). The issue's held-out entry that trains 1.25 epochs from a shipped start
measured 13.8 CPU-seconds, 3.6 forward passes: above the floor (the cross-seed weights
check names it, not this one).

The floor is a lower bound on work, not proof of learning: an author may burn CPU before
asking (it costs clock time, and the reviewer sees the figures). A smoke run's training
set (2,048 items) makes the floor a few hundredths of a CPU-second: start-up alone clears
it, so smoke runs are never named by it. On a GPU host the CPU figure says little (the
forward pass runs on the GPU): the GPUs' busy time is recorded beside it
(``gpu_work_seconds``) and not judged.

``runner verify`` recomputes the verdict from the bundle's events (the freeze's
``cpu_seconds``, the answer's ``predict_cpu_seconds``) and ``training.train_samples``;
results written before these fields record the evidence as not recorded.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

# The floor, in forward passes of the scored model over the training set (the module's
# docstring has the figures behind it).
FRACTION = 1.5
CLASS4F = "class 4 (no evidence of training): "


@dataclass
class TrainingEvidence:
    """``training.evidence`` in result.json."""

    crossing: int
    cpu_seconds: float | None  # the training containers' CPU time up to the crossing's freeze
    forward_pass_cpu_seconds: float | None  # one forward pass of the crossing model over the training set
    ratio: float | None  # cpu_seconds / forward_pass_cpu_seconds
    floor_cpu_seconds: float | None  # FRACTION * forward_pass_cpu_seconds
    fraction: float
    train_items: int | None
    predicted_items: int | None  # what the evaluator predicted for the crossing (clean + probe)
    predict_cpu_seconds: float | None  # ... in this many of its CPU-seconds
    gpu_work_seconds: float | None = None  # the run's GPUs' busy time up to the crossing (recorded)
    not_measured: str | None = None  # why there is no verdict

    def to_dict(self) -> dict:
        return asdict(self)


def predicted_items(scored, eval_size: int) -> int:
    """The items one evaluation predicted: its clean set and the probe's items."""
    clean = scored.count or eval_size
    return clean + (min(scored.probe_items or clean, clean) if scored.probe_predictions else 0)


def training_evidence(scored: list, crossing: int | None, train_items: int | None,
                      eval_size: int, judged: bool = True, fraction: float = FRACTION) -> tuple[dict | None, str | None]:
    """(``training.evidence``, the class 4 reason or None) for the crossing evaluation.
    ``judged`` False (a task whose inputs are questions): the figures are recorded, no verdict
    is given, since the evaluator's cost per question is mostly the harness's tokenisation and
    span decoding, not the model's forward pass (drqa-squad's smoke run: 25 questions per
    CPU-second, ratio 0.99 for an honest run). ``fraction``: the floor the rules set
    (``Rules.evidence_fraction``; ``runner verify`` passes the result's own)."""
    if crossing is None or not 0 <= crossing < len(scored):
        return None, None
    s = scored[crossing]
    items = predicted_items(s, eval_size)
    evidence = TrainingEvidence(crossing, s.cpu_seconds, None, None, None, fraction,
                                train_items if isinstance(train_items, int) and train_items > 0 else None,
                                items, s.predict_cpu_seconds, s.gpu_work_seconds)
    missing = [what for what, value in (("the training containers' CPU time", s.cpu_seconds),
                                        ("the evaluator's CPU time to predict", s.predict_cpu_seconds),
                                        ("the training set's size", evidence.train_items)) if value is None]
    if missing or not s.predict_cpu_seconds or not items:
        evidence.not_measured = "not recorded: " + (", ".join(missing) or "the evaluator used no CPU time")
        return evidence.to_dict(), None
    forward = s.predict_cpu_seconds * evidence.train_items / items
    evidence.forward_pass_cpu_seconds = round(forward, 6)
    evidence.floor_cpu_seconds = round(fraction * forward, 6)
    evidence.ratio = round(s.cpu_seconds / forward, 4)
    if s.cpu_seconds >= evidence.floor_cpu_seconds or not judged:
        return evidence.to_dict(), None
    rate = items / s.predict_cpu_seconds
    return evidence.to_dict(), (
        f"{CLASS4F}checkpoint {crossing} crossed the threshold after {s.cpu_seconds:.2f} CPU-seconds of training, "
        f"less than {fraction:g} times one forward pass of the scored model over the training set "
        f"({forward:.2f} CPU-seconds for {evidence.train_items} items at the evaluator's {rate:.0f} items per "
        f"CPU-second; ratio {evidence.ratio:.2f}): no evidence of training")
