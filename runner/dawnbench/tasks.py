"""DAWNBench's task folders and accuracy fields, mapped to the runner's task registry.

Each task declares its format (``Task.dawnbench_format``: folder, metric field, percent or
fraction); DAWNBench publishes accuracies in percent, except SQuAD's ``f1Score``, a fraction.
MNIST and Fashion-MNIST are the runner's offline tasks: not DAWNBench's, but written in
the same format so that one leaderboard holds them all (after DAWNBench's own tasks).
"""

from __future__ import annotations

from dataclasses import dataclass

from runner.tasks import TASKS, Task, get_task

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


# DAWNBench's own tasks first, then the runner's offline ones, each in the registry's order.
FORMAT_TASKS: tuple[FormatTask, ...] = tuple(
    FormatTask(t.dawnbench_format.folder, t.id, t.dawnbench_format.metric_field, t.curve_columns,
               t.dawnbench_format.percent)
    for t in sorted(TASKS.values(), key=lambda t: t.dawnbench is None)
    if t.dawnbench_format is not None
)
BY_FOLDER = {t.folder.lower(): t for t in FORMAT_TASKS}
BY_TASK_ID = {t.task_id: t for t in FORMAT_TASKS}
# An accuracy field that one task alone is judged on names that task (SQuAD's f1Score,
# ImageNet's top5Accuracy), for a file under no task folder.
BY_METRIC_FIELD = {
    field: matches[0]
    for field in dict.fromkeys(t.metric_field for t in FORMAT_TASKS)
    if len(matches := [t for t in FORMAT_TASKS if t.metric_field == field]) == 1
}


def format_task(task_id: str) -> FormatTask:
    get_task(task_id)  # an unknown id is a UserError naming the known ones
    return BY_TASK_ID[task_id]
