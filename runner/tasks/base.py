"""What a task declares, in one place: the ``Task`` every task package builds (its ``TASK``)
and the small records it holds. Kept apart from the registry (``runner.tasks``) so a task
package imports only this module, and importing the registry never imports the data code.

A task's modules are named, not imported: ``DataSource.module`` and ``Task.synthetic`` are
dotted names (``"pkg.module"``, ``"pkg.module:function"``) loaded on first use, because those
modules stage data with ``runner.data``, which itself reads the registry.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, replace
from types import ModuleType

from runner.tasks.rules import FIRST, Rules

IMAGES, QUESTIONS = "images", "questions"

IMAGE_PROBE = ("every evaluation image shifted by one pixel in a direction drawn from the run's seed; "
               "the crossing checkpoint may lose at most 10 points (runner/score/probe.py)")
QUESTION_PROBE = ("one unrelated sentence, drawn from the run's seed, appended to every context (the answers "
                  "keep their character offsets, as in adversarial SQuAD's control); the crossing checkpoint "
                  "may lose at most 0.10 F1 (runner/score/probe.py)")


def resolve(ref: str):
    """The module ``"pkg.module"`` names, or the attribute ``"pkg.module:name"`` names."""
    module, _, attr = ref.partition(":")
    loaded = importlib.import_module(module)
    return getattr(loaded, attr) if attr else loaded


@dataclass(frozen=True)
class PublicInput:
    """A public artifact an entry of the task may start from (declared in its manifest's
    ``public_inputs``, pinned here, imported by ``runner data import NAME PATH``, mounted
    read-only at ``/data/public/<name>``); everything else in the image stays under the audit."""

    name: str
    description: str
    archive: str  # the official archive's file name
    archive_sha1: str  # its SHA-1 as published (the digests in use for these files are SHA-1)
    files: tuple[tuple[str, str], ...]  # (file in the archive, its SHA-1): what is kept and mounted
    url: str
    digest_source: str  # where the pinned digests come from


@dataclass(frozen=True)
class ExtraSet:
    """A second test set of the task, collected after the first by the same protocol (QMNIST's
    lost MNIST digits, CIFAR-10.1, ImageNetV2): ``runner study generalization`` scores a run's
    final model on it. Imported from the user's copy of its official files (``runner data
    import NAME PATH``), each pinned by its published SHA-256, and staged like an evaluation
    set (``eval/images.npy``; the labels stay on the host) under the data folder's
    ``extra/<name>/``. ``module`` names the module that reads the official files
    (``import_files(path, target, *, expected)``, ``OFFICIAL``) and writes a stand-in in the
    same format (``write_standin(folder, images, labels)``) for tests and smoke studies."""

    name: str
    description: str
    files: tuple[tuple[str, str], ...]  # (official file name, its published sha256)
    count: int  # the items it stages
    module: str  # dotted name of the module that imports it
    url: str
    digest_source: str  # where the pinned digests come from

    def load(self) -> ModuleType:
        return resolve(self.module)


@dataclass(frozen=True)
class DataSource:
    """Where a task's data comes from and how a user stages it.

    A *prepared* source fetches its set from a package registry: ``prepare(target)``; the PyPI
    packages it takes the set from are its module's ``DATA_PACKAGES``, which no entry's lock may
    pin (they would carry the evaluation set, labels included, into the image). An *imported*
    source stages the user's copy of the official files: ``import_files(path, target, *,
    expected, **extras)``, where ``extras`` are the other files it needs by name (ImageNet's
    ``devkit``, SQuAD's ``train``), and its module's ``OFFICIAL`` holds the publisher's
    checksums and counts.

    A task whose training split is a tree of files kept as such (ImageNet) names the folder
    it is imported to (``tree``, under the data folder) and the module that imports and checks
    it (``tree_module``: ``OFFICIAL``, ``import_tree``, ``load_tree``, ``check_tree``,
    ``is_train_source``, ``devkit_classes``, ``TrainTree``).
    """

    module: str  # dotted name of the module that stages the set
    imported: bool  # from the user's files (else prepared from a package registry)
    how_to_stage: str  # what a user runs to stage it (shown when it is missing)
    extras: tuple[str, ...] = ()  # other files import_files takes, by keyword
    tree: str | None = None  # the training tree's folder under paths.data_dir(), if any
    tree_module: str | None = None

    def load(self) -> ModuleType:
        return resolve(self.module)

    def load_tree(self) -> ModuleType:
        if self.tree_module is None:
            raise LookupError(f"{self.module} stages no training tree")
        return resolve(self.tree_module)


@dataclass(frozen=True)
class DawnbenchFormat:
    """How DAWNBench's submission files (and the runner's, in the same format) hold the task."""

    folder: str  # DAWNBench's folder name, e.g. "CIFAR10"
    metric_field: str  # the field compared with the threshold: top1Accuracy, top5Accuracy, f1Score
    percent: bool  # accuracies in percent (True) or as a fraction (SQuAD's f1Score)


@dataclass(frozen=True)
class CrossSeedLimits:
    """How alike two honest runs of the task with different runner-drawn seeds may be, at
    their crossing checkpoints (``runner.score.across_runs``), set from measured honest pairs
    kept in the task's folder (``evidence``). ``mistakes``: the Jaccard of their mistakes
    (item, wrong answer; clean and probe), judged on a lower confidence bound so that a
    few mistakes do not decide; ``weights``: the correlation of their weights after the
    hidden units are aligned (``runner.score.aligned_weights``), overall and per layer."""

    mistakes: float = 0.9
    weights: float = 0.5
    evidence: str | None = None  # the file beside the task's __init__.py with the honest pairs
    # The width of a declared public input's vectors (GloVe: 300): a table of that width with
    # more rows than columns starts from the public input in every run by design (the word
    # vectors, fixed or fine-tuned) and is left out of the weights' comparison.
    public_width: int | None = None


@dataclass(frozen=True)
class DescentLimits:
    """The least cosine similarity each tensor of a scored model drawn at random by the runner
    may keep with its initial value (``runner.score.descent``: per tensor large enough to be
    judged alone, and size-weighted overall), set from honest runs of the task's entries kept
    in the task's folder (``evidence``). The default is far under any honest run measured and
    far over chance for every tensor judged alone; a task with calibrated runs sets its own."""

    similarity: float = 0.10
    evidence: str | None = None


@dataclass(frozen=True)
class Task:
    id: str
    metric: str  # "top1", "top5" or "f1"
    threshold: float  # as a fraction for accuracies, as F1 points / 100 for SQuAD
    eval_size: int  # items in the evaluation set; a predictions file must have exactly this many
    num_classes: int | None
    input_shape: tuple[int, ...] | None  # one item, C x H x W; None for text
    curve_columns: tuple[str, ...]  # DAWNBench's TSV columns after "epoch hours"
    # What the evaluator gives the model and gets back: "images" (N x C x H x W uint8 ->
    # class scores) or "questions" (context + question -> an answer span; run contract).
    inputs: str = IMAGES
    probe: str = IMAGE_PROBE  # the generalization probe, or why the task has none
    dawnbench: str | None = None  # DAWNBench's task name (its submissions' "task" field)
    mlperf: str | None = None  # MLPerf's benchmark name, where it has one
    public_inputs: tuple[PublicInput, ...] = ()
    # The primary score of a model that knows nothing, for tasks without classes: the base
    # of the checkpoint-sensitivity rule (runner/score/model_origin.py).
    chance_score: float | None = None
    # --- what the rest of the runner derives its per-task tables from ---
    listed: int = 0  # where the task comes in the runner's lists (data list, leaderboards)
    source: DataSource | None = None  # runner.data: SOURCES, PREPARABLE, HOW_TO_STAGE, TREE_TASKS
    # "module:function" staging a synthetic stand-in for smoke runs (runner.data.synthetic):
    # called as f(stage, rng, task, n_train, n_eval); the order of its random draws fixes
    # what a seed gives, so it never changes once runs are archived.
    synthetic: str | None = None
    dawnbench_format: DawnbenchFormat | None = None  # runner.dawnbench.tasks.FORMAT_TASKS
    # The MLPerf training benchmark a run's log reports under (open division: the closest
    # one; runner.mlperf.training_log.TASK_BENCHMARK).
    mlperf_training: str | None = None
    # The information budget of an entry of this task in bytes (runner/entry_build/information.py),
    # when it is not the default: what the entry's files and its build steps may carry, compressed.
    information_budget: int | None = None
    public_train_size: int | None = None  # items in the public training set (runner.mlperf)
    threshold_ladder: tuple[float, ...] = ()  # percent, up to the threshold (runner study threshold)
    # "module:function" scoring predictions against the host's labels: f(task, predictions,
    # labels) -> {metric: fraction} (the evaluator's, the inference phase's and verify's scores).
    scorer: str = "runner.tasks.metrics:score_classification"
    # "module:function" giving a staged smoke set's words, f(staged) -> [word, ...]: a task
    # with public inputs made of words (GloVe) gets synthetic vectors for exactly these.
    smoke_words: str | None = None
    cross_seed: CrossSeedLimits = CrossSeedLimits()  # runs that must be independent (runner.score.across_runs)
    descent: DescentLimits = DescentLimits()  # scored models must descend from the runner's start (runner.score.descent)
    # Second test sets (runner study generalization): the first is the study's default.
    extra_sets: tuple[ExtraSet, ...] = ()
    # Tasks a linear head is trained on over the final model's penultimate features (runner
    # study generalization's transfer), in order of preference; none declared: any staged
    # task with the same input shape.
    transfer_tasks: tuple[str, ...] = ()
    # The rules a result of the task is judged by (runner.tasks.rules), set by discovery from
    # the task's rules/ folder: every published version, oldest first, and the one applied
    # (today's, the newest; a verified result's own: ``under``). A task declared in code
    # without a rules folder (tests) is judged by version 1 of its own fields.
    rules_version: str = FIRST
    rules_history: tuple[Rules, ...] = ()
    applied_rules: Rules | None = None

    @property
    def rules(self) -> Rules:
        """The rules the task applies (``rules_version``'s)."""
        if self.applied_rules is not None:
            return self.applied_rules
        return Rules(self.id, self.rules_version, self.threshold, descent_similarity=self.descent.similarity,
                     cross_seed_mistakes=self.cross_seed.mistakes, cross_seed_weights=self.cross_seed.weights,
                     **({"information_budget": self.information_budget} if self.information_budget else {}))

    def rules_of(self, version: str) -> Rules:
        """A published version of the task's rules; ``LookupError`` naming the known ones."""
        known = self.rules_history or (self.rules,)
        for rules in known:
            if rules.version == version:
                return rules
        raise LookupError(f"result made under {self.id} rules v{version}, which this runner does not know "
                          f"(it knows {', '.join('v' + r.version for r in known)})")

    def under(self, rules: Rules) -> Task:
        """The task judged by ``rules`` (its threshold and calibrated limits)."""
        return replace(self, threshold=rules.threshold, rules_version=rules.version, applied_rules=rules,
                       descent=replace(self.descent, similarity=rules.descent_similarity),
                       cross_seed=replace(self.cross_seed, mistakes=rules.cross_seed_mistakes,
                                          weights=rules.cross_seed_weights))

    @property
    def topk(self) -> int:
        """Ranked classes a prediction must give: 5 for top-5 tasks, else 1."""
        return 5 if self.metric == "top5" else 1

    @property
    def threshold_percent(self) -> float:
        return round(self.threshold * 100, 4)

    def meets(self, score: float) -> bool:
        # Scores are fractions; a tiny tolerance keeps 0.993 == 9930/10000 exact.
        return score + 1e-12 >= self.threshold

    def score(self, predictions, labels) -> dict[str, float]:
        """Every score the task reports for ``predictions`` (its primary ``metric`` among them)."""
        return resolve(self.scorer)(self, predictions, labels)

    def smoke_vocabulary(self, staged) -> list[str] | None:
        """The words of a staged smoke set, for synthetic public inputs (None: none declared)."""
        return resolve(self.smoke_words)(staged) if self.smoke_words else None

    def synthetic_maker(self):
        """The function that stages this task's synthetic stand-in."""
        if self.synthetic is None:
            raise LookupError(f"task {self.id} declares no synthetic stand-in")
        return resolve(self.synthetic)
