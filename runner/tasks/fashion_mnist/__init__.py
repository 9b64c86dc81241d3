"""Fashion-MNIST, the runner's second offline task (the MNIST entries' twins run on it): not
DAWNBench's, written in its format. Its data comes from Debian's package (``source.py``)."""

from runner.tasks.base import CrossSeedLimits, DataSource, DawnbenchFormat, DescentLimits, Task

TASK = Task(
    "fashion-mnist", "top1", 0.92, 10_000, 10, (1, 28, 28), ("top1Accuracy",),
    listed=20,
    source=DataSource(f"{__name__}.source", imported=False,
                      how_to_stage="run `runner data prepare fashion-mnist`"),
    synthetic="runner.staging.blocks:stage_arrays",
    dawnbench_format=DawnbenchFormat("FashionMNIST", "top1Accuracy", percent=True),
    mlperf_training="resnet",
    public_train_size=60_000,
    threshold_ladder=(90.0, 91.0, 92.0, 93.0),
    # the cross-seed and descent limits are in rules/ (calibrated on the twins' honest runs:
    # calibration.md)
    cross_seed=CrossSeedLimits(evidence="calibration.md"),
    descent=DescentLimits(evidence="calibration.md"),
)
