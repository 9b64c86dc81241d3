"""ImageNet (ILSVRC2012), DAWNBench's large image task (93 % top-5). The evaluation set is
imported from the official validation tar and devkit (``source.py``); the training set stays a
read-only tree of JPEGs (``train_tree.py``); smoke runs get a small tree (``synthetic.py``)."""

from runner.tasks.base import DataSource, DawnbenchFormat, DescentLimits, ExtraSet, Task

# ImageNetV2 matched-frequency (imagenetv2.py): 10,000 new test images, ten per class.
# SHA-256 as TensorFlow Datasets lists it.
IMAGENETV2 = ExtraSet(
    "imagenetv2", "ImageNetV2 matched-frequency: 10,000 new test images collected by ImageNet's protocol",
    files=(("imagenetv2-matched-frequency.tar.gz",
            "f0c37fdf925916b19ea1323cd9a2208cdb6959ba2c32eef2a7fc393835c9ca7c"),),
    count=10_000, module=f"{__name__}.imagenetv2", url="https://github.com/modestyachts/ImageNetV2",
    digest_source="TensorFlow Datasets, tensorflow_datasets/datasets/imagenet_v2/checksums.tsv",
)

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
    extra_sets=(IMAGENETV2,),
    descent=DescentLimits(evidence="calibration.md"),  # its limit in rules/: no full run here yet
)
