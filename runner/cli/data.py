"""``runner data``: stage the data sets runs use, and show what is staged."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from runner import data, paths
from runner.cli.arguments.data import EXTRA, PUBLIC
from runner.data.public_inputs import check_input, import_input, staged_input
from runner.errors import UserError
from runner.tasks import TASKS
from runner.terminal import MISSING, Column, compact_table, yes_no


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
        public = import_input(args.task, args.path)
        for file, facts in sorted(public.files.items()):
            print(f"imported {args.task}: {file}, {facts['bytes']:,} bytes, sha1 {facts['sha1']} (the published "
                  f"digest), sha256 {facts['sha256']}")
        print(f"  at {public.folder} (mounted read-only at /data/public/{args.task} for entries that declare it)")
        return 0
    if args.task in EXTRA:
        from runner.data.extra_sets import import_extra  # lazy: start-up (the command's own modules, when it runs)

        extra = import_extra(args.task, args.path, unofficial=args.unofficial)
        print(f"imported second test set {args.task}: {extra.counts['eval']:,} items; digest {extra.digest}")
        for name, digest in sorted(extra.details.get("files", {}).items()):
            print(f"  {name}: sha256 {digest} ({extra.details.get('digests')})")
        print(f"  at {extra.root} (labels kept on the host in {extra.labels})")
        if not extra.conforming:
            print("  UNOFFICIAL: studies on this set say so")
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
    _report(data.import_dataset(
        args.task, args.path, devkit=args.devkit, train=args.train, unofficial=args.unofficial
    ))
    return 0


def _check(args: argparse.Namespace) -> int:
    if args.task in PUBLIC:
        public = check_input(args.task)
        print(f"{args.task} intact: {', '.join(sorted(public.files))} re-hashed against the published digests")
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
    rows = []
    for task in TASKS:
        s = found.get(task)
        if s is None:
            rows.append([task, MISSING, MISSING, MISSING, "not staged", MISSING])
            continue
        rows.append([
            task,
            f"{s.counts['train']:,}" if "train" in s.counts else MISSING,
            f"{s.counts['eval']:,}" if "eval" in s.counts else MISSING,
            yes_no(s.conforming),
            s.digest[: len("sha256:") + 16],
            escape(str(s.source)),
        ])
    console = Console()
    console.print(compact_table(f"Staged data sets ({paths.data_dir()})", [
        Column("task"), Column("train", number=True), Column("eval", number=True), Column("conforming"),
        Column("digest"), Column("source", wrap=True)], rows, hide_empty=False))
    for task in TASKS:
        if task not in found:
            console.print(f"to stage {task}: {data.HOW_TO_STAGE[task]}", highlight=False)
    from runner.data.extra_sets import staged_extra  # lazy: start-up (the command's own modules, when it runs)

    for name in EXTRA:
        try:
            extra = staged_extra(name)
            official = "official" if extra.conforming else "UNOFFICIAL"
            console.print(f"second test set {name}: {extra.counts.get('eval', 0):,} items ({official}) at {extra.root}",
                          highlight=False)
        except UserError as exc:
            console.print(f"second test set {name}: not imported ({exc.fix})", highlight=False)
    for name in PUBLIC:
        try:
            public = staged_input(name)
            console.print(f"public input {name}: {', '.join(sorted(public.files))} at {public.folder}",
                          highlight=False)
        except UserError as exc:
            console.print(f"public input {name}: not imported ({exc.fix})", highlight=False)
    return 0
