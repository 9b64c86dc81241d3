"""ImageNet (ILSVRC2012), DAWNBench's large image task (93 % top-5). The evaluation set is
imported from the official validation tar and devkit (``source.py``); the training set stays a
read-only tree of JPEGs (``train_tree.py``); smoke runs get a small tree (``synthetic.py``)."""

from runner.tasks.base import DataSource, DawnbenchFormat, Task

TASK = Task(
    "imagenet", "top5", 0.93, 50_000, 1000, (3, 224, 224),
    ("top1Accuracy", "top5Accuracy"), dawnbench="ImageNet", mlperf="resnet",
    listed=40,
    source=DataSource(
        f"{__name__}.source", imported=True, extras=("devkit",),
        how_to_stage=(
            "run `runner data import imagenet PATH/ILSVRC2012_img_val.tar "
            "--devkit PATH/ILSVRC2012_devkit_t12.tar.gz` and, to train, "
            "`runner data import imagenet PATH/ILSVRC2012_img_train.tar`"
        ),
        tree="imagenet-train", tree_module=f"{__name__}.train_tree",
    ),
    synthetic=f"{__name__}.synthetic:stage_tree",
    dawnbench_format=DawnbenchFormat("ImageNet", "top5Accuracy", percent=True),
    mlperf_training="resnet",
    public_train_size=1_281_167,
    threshold_ladder=(90.0, 91.0, 92.0, 93.0),  # top-5
)
