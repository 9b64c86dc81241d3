"""CIFAR-10, DAWNBench's small image task (94 % top-1). Its data is the user's copy of the
official archive (``source.py``)."""

from runner.tasks.base import DataSource, DawnbenchFormat, Task

TASK = Task(
    "cifar10", "top1", 0.94, 10_000, 10, (3, 32, 32), ("top1Accuracy",),
    dawnbench="CIFAR10",
    listed=30,
    source=DataSource(f"{__name__}.source", imported=True,
                      how_to_stage="run `runner data import cifar10 PATH/cifar-10-python.tar.gz`"),
    synthetic="runner.staging.blocks:stage_arrays",
    dawnbench_format=DawnbenchFormat("CIFAR10", "top1Accuracy", percent=True),
    mlperf_training="resnet",
    public_train_size=50_000,
    threshold_ladder=(91.0, 92.0, 93.0, 94.0),
)
