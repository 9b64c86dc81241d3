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


# DAWNBench's SQuAD entries (DrQA, BiDAF) start from GloVe word vectors. Stanford NLP
# publishes no checksums; the SHA-1 digests of the official zips and of the text files in them
# are the ones Apache MXNet's text-embedding registry pins for the same URLs.
_GLOVE_DIGESTS = ("Apache MXNet's text-embedding registry (mxnet/contrib/text/_constants.py, "
                  "GLOVE_PRETRAINED_FILE_SHA1 and GLOVE_PRETRAINED_ARCHIVE_SHA1)")
SQUAD_PUBLIC_INPUTS = (
    PublicInput("glove.840B.300d", "GloVe, Common Crawl 840B tokens, 300d", "glove.840B.300d.zip",
                "8084fbacc2dee3b1fd1ca4cc534cbfff3519ed0d",
                (("glove.840B.300d.txt", "294b9f37fa64cce31f9ebb409c266fc379527708"),),
                "https://nlp.stanford.edu/data/glove.840B.300d.zip", _GLOVE_DIGESTS),
    PublicInput("glove.6B", "GloVe, Wikipedia 2014 + Gigaword 5, 6B tokens, 50/100/200/300d",
                "glove.6B.zip", "b64e54f1877d2f735bdd000c1d7d771e25c7dfdc",
                (("glove.6B.50d.txt", "21bf566a9d27f84d253e0cd4d4be9dcc07976a6d"),
                 ("glove.6B.100d.txt", "16b1dbfaf35476790bd9df40c83e2dfbd05312f1"),
                 ("glove.6B.200d.txt", "17d0355ddaa253e298ede39877d1be70f99d9148"),
                 ("glove.6B.300d.txt", "646443dd885090927f8215ecf7a677e9f703858d")),
                "https://nlp.stanford.edu/data/glove.6B.zip", _GLOVE_DIGESTS),
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


def public_input(name: str) -> PublicInput:
    """A declared public input by name, whichever task declares it."""
    for task in TASKS.values():
        for item in task.public_inputs:
            if item.name == name:
                return item
    known = sorted({i.name for t in TASKS.values() for i in t.public_inputs})
    raise UserError(f"no public input named {name!r}", f"use one of: {', '.join(known)}")


def get_task(task_id: str) -> Task:
    try:
        return TASKS[task_id]
    except KeyError:
        raise UserError(
            f"unknown task '{task_id}'", f"use one of: {', '.join(sorted(TASKS))}"
        ) from None
