"""DAWNBench's task folders and accuracy fields, mapped to the runner's task registry.

DAWNBench publishes accuracies in percent, except SQuAD's ``f1Score``, a fraction.
MNIST and Fashion-MNIST are the runner's offline tasks: not DAWNBench's, but written in
the same format so that one leaderboard holds them all.
"""

from __future__ import annotations

from dataclasses import dataclass

from runner.tasks import Task, get_task

# Inference cost is shown for this many items; the submission files give it per item.
COST_ITEMS = 10_000


@dataclass(frozen=True)
class FormatTask:
    folder: str  # DAWNBench's folder name, e.g. "CIFAR10"
    task_id: str  # the runner's task id, e.g. "cifar10"
    metric_field: str  # the field compared with the threshold: top1Accuracy, top5Accuracy, f1Score
    columns: tuple[str, ...]  # the TSV's columns after "epoch hours", in README order
    percent: bool  # accuracies in percent (True) or as a fraction (SQuAD's f1Score)

    @property
    def task(self) -> Task:
        return get_task(self.task_id)

    @property
    def threshold(self) -> float:
        """The threshold in this format's unit (94 for CIFAR10, 0.75 for SQuAD)."""
        t = self.task.threshold
        return round(t * 100, 6) if self.percent else t

    def to_fraction(self, value: float) -> float:
        return value / 100 if self.percent else value

    def from_fraction(self, value: float) -> float:
        return value * 100 if self.percent else value


FORMAT_TASKS: tuple[FormatTask, ...] = (
    FormatTask("CIFAR10", "cifar10", "top1Accuracy", ("top1Accuracy",), True),
    FormatTask("ImageNet", "imagenet", "top5Accuracy", ("top1Accuracy", "top5Accuracy"), True),
    FormatTask("SQuAD", "squad-v1.1", "f1Score", ("f1Score",), False),
    FormatTask("MNIST", "mnist", "top1Accuracy", ("top1Accuracy",), True),
    FormatTask("FashionMNIST", "fashion-mnist", "top1Accuracy", ("top1Accuracy",), True),
)
BY_FOLDER = {t.folder.lower(): t for t in FORMAT_TASKS}
BY_TASK_ID = {t.task_id: t for t in FORMAT_TASKS}


def format_task(task_id: str) -> FormatTask:
    get_task(task_id)  # an unknown id is a UserError naming the known ones
    return BY_TASK_ID[task_id]
