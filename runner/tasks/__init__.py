"""The benchmark tasks: what is scored, against which threshold, on how many items."""

from runner.tasks.registry import TASKS, Task, get_task

__all__ = ["TASKS", "Task", "get_task"]
