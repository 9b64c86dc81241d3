"""The task registry. Thresholds and evaluation-set sizes are DAWNBench's (and, for the
offline tasks, the usual MNIST / Fashion-MNIST test sets)."""

from __future__ import annotations

from dataclasses import dataclass

from runner.errors import UserError

IMAGES, QUESTIONS = "images", "questions"

IMAGE_PROBE = ("every evaluation image shifted by one pixel in a direction drawn from the run's seed; "
               "the crossing checkpoint may lose at most 10 points (runner/score/probe.py)")
QUESTION_PROBE = ("one unrelated sentence, drawn from the run's seed, appended to every context (the answers "
                  "keep their character offsets, as in adversarial SQuAD's control); the crossing checkpoint "
                  "may lose at most 0.10 F1 (runner/score/probe.py)")


@dataclass(frozen=True)
class PublicInput:
    """A public artifact an entry of the task may start from (declared, pinned, mounted read-only
    at ``/data/public/<name>``); everything else in the image stays under the image audit."""

    name: str
    description: str
    file: str  # the official file name
    # "sha256:..." of the official file; None while nobody here has pinned it (then an import
    # records the digest it saw and the result is non-conforming, like unofficial data)
    digest: str | None
    url: str


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


# DAWNBench's SQuAD entries (DrQA, BiDAF) start from GloVe word vectors. The digests are of
# the official zip files as published by Stanford NLP: NOT PINNED YET (no copy was at hand
# to hash; a digest typed from memory would be worse than none).
SQUAD_PUBLIC_INPUTS = (
    PublicInput("glove.840B.300d", "GloVe, Common Crawl 840B tokens, 300d", "glove.840B.300d.zip",
                None,
                "https://nlp.stanford.edu/data/glove.840B.300d.zip"),
    PublicInput("glove.6B", "GloVe, Wikipedia 2014 + Gigaword 5, 6B tokens, 50/100/200/300d",
                "glove.6B.zip",
                None,
                "https://nlp.stanford.edu/data/glove.6B.zip"),
)

TASKS: dict[str, Task] = {
    t.id: t
    for t in [
        Task("mnist", "top1", 0.993, 10_000, 10, (1, 28, 28), ("top1Accuracy",)),
        Task("fashion-mnist", "top1", 0.92, 10_000, 10, (1, 28, 28), ("top1Accuracy",)),
        Task("cifar10", "top1", 0.94, 10_000, 10, (3, 32, 32), ("top1Accuracy",),
             dawnbench="CIFAR10"),
        Task(
            "imagenet", "top5", 0.93, 50_000, 1000, (3, 224, 224),
            ("top1Accuracy", "top5Accuracy"), dawnbench="ImageNet", mlperf="resnet",
        ),
        Task("squad-v1.1", "f1", 0.75, 10_570, None, None, ("f1Score",),
             inputs=QUESTIONS, probe=QUESTION_PROBE, dawnbench="SQuAD",
             public_inputs=SQUAD_PUBLIC_INPUTS, chance_score=0.10),
    ]
}


def get_task(task_id: str) -> Task:
    try:
        return TASKS[task_id]
    except KeyError:
        raise UserError(
            f"unknown task '{task_id}'", f"use one of: {', '.join(sorted(TASKS))}"
        ) from None
