"""The task registry. Thresholds and evaluation-set sizes are DAWNBench's (and, for the
offline tasks, the usual MNIST / Fashion-MNIST test sets)."""

from __future__ import annotations

from dataclasses import dataclass

from runner.errors import UserError


@dataclass(frozen=True)
class Task:
    id: str
    metric: str  # "top1", "top5" or "f1"
    threshold: float  # as a fraction for accuracies, as F1 points / 100 for SQuAD
    eval_size: int  # items in the evaluation set; a predictions file must have exactly this many
    num_classes: int | None
    input_shape: tuple[int, ...] | None  # one item, C x H x W; None for text
    curve_columns: tuple[str, ...]  # DAWNBench's TSV columns after "epoch hours"

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


TASKS: dict[str, Task] = {
    t.id: t
    for t in [
        Task("mnist", "top1", 0.993, 10_000, 10, (1, 28, 28), ("top1Accuracy",)),
        Task("fashion-mnist", "top1", 0.92, 10_000, 10, (1, 28, 28), ("top1Accuracy",)),
        Task("cifar10", "top1", 0.94, 10_000, 10, (3, 32, 32), ("top1Accuracy",)),
        Task(
            "imagenet", "top5", 0.93, 50_000, 1000, (3, 224, 224),
            ("top1Accuracy", "top5Accuracy"),
        ),
        Task("squad-v1.1", "f1", 0.75, 10_570, None, None, ("f1Score",)),
    ]
}


def get_task(task_id: str) -> Task:
    try:
        return TASKS[task_id]
    except KeyError:
        raise UserError(
            f"unknown task '{task_id}'", f"use one of: {', '.join(sorted(TASKS))}"
        ) from None
