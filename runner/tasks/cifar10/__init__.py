"""CIFAR-10, DAWNBench's small image task (94 % top-1). Its data is the user's copy of the
official archive (``source.py``)."""

from runner.tasks.base import DataSource, DawnbenchFormat, DescentLimits, ExtraSet, Task

# CIFAR-10.1 v6 (cifar10_1.py): 2,000 new test images collected by CIFAR-10's protocol.
# SHA-256 as TensorFlow Datasets lists them.
CIFAR10_1 = ExtraSet(
    "cifar10.1", "CIFAR-10.1 v6: 2,000 new test images collected by CIFAR-10's protocol",
    files=(("cifar10.1_v6_data.npy", "2997188e5816f5bd545dc77771b6227828c28146049fcecf3fa10775474cacc6"),
           ("cifar10.1_v6_labels.npy", "ae40beda001693674edc94d925ee8268cfe68905f8f9aff800c8dcdfcd6c9448")),
    count=2_000, module=f"{__name__}.cifar10_1", url="https://github.com/modestyachts/CIFAR-10.1",
    digest_source="TensorFlow Datasets, tensorflow_datasets/url_checksums/cifar10_1.txt",
)

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
    extra_sets=(CIFAR10_1,),
    descent=DescentLimits(evidence="calibration.md"),  # its limit in rules/: no full run here yet
)
