"""MNIST, the runner's first offline task: not DAWNBench's, written in its format so that one
leaderboard holds it. Its data comes from a pinned PyPI wheel (``source.py``)."""

from runner.tasks.base import CrossSeedLimits, DataSource, DawnbenchFormat, DescentLimits, ExtraSet, Task

# QMNIST's test split (qmnist.py): its rows 10,000..59,999, the 50,000 MNIST test digits never
# released, rebuilt from NIST SD19. SHA-256 as torchvision's QMNIST dataset pins them.
QMNIST = ExtraSet(
    "qmnist", "QMNIST's 50,000 extra test digits (rows 10,000..59,999 of its test split)",
    files=(("qmnist-test-images-idx3-ubyte.gz", "43fc22bf7498b8fc98de98369d72f752d0deabc280a43a7bcc364ab19e57b375"),
           ("qmnist-test-labels-idx2-int.gz", "9fbcbe594c3766fdf4f0b15c5165dc0d1e57ac604e01422608bb72c906030d06")),
    count=50_000, module=f"{__name__}.qmnist", url="https://github.com/facebookresearch/qmnist",
    digest_source="torchvision's QMNIST._CHECKSUMS, torchvision/prototype/datasets/_builtin/mnist.py",
)

TASK = Task(
    "mnist", "top1", 0.993, 10_000, 10, (1, 28, 28), ("top1Accuracy",),
    listed=10,
    source=DataSource(f"{__name__}.source", imported=False, how_to_stage="run `runner data prepare mnist`"),
    synthetic="runner.staging.blocks:stage_arrays",
    dawnbench_format=DawnbenchFormat("MNIST", "top1Accuracy", percent=True),
    mlperf_training="resnet",
    public_train_size=60_000,
    threshold_ladder=(98.5, 99.0, 99.3, 99.5),
    # the cross-seed and descent limits are in rules/ (calibrated on the default entry's
    # honest runs: calibration.md)
    cross_seed=CrossSeedLimits(evidence="calibration.md"),
    descent=DescentLimits(evidence="calibration.md"),
    extra_sets=(QMNIST,),
    transfer_tasks=("fashion-mnist",),
)
