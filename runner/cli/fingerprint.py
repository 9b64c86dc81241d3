"""``runner fingerprint``: describe this host (and optionally an image's software)."""

from __future__ import annotations

import io
import sys
from pathlib import Path

from rich.console import Console

from runner.cli.arguments.fingerprint import FILE_NAMES
from runner.engine import get_engine
from runner.entry_build import build_entry  # builds (or finds the cached build of) the entry
from runner.errors import UserError
from runner.fingerprint import capture_host, capture_image
from runner.manifest import load_entry
from runner.mlperf.config import load_settings, set_command
from runner.mlperf.system import submission_description
from runner.terminal import json_text


def _target(args) -> Path | None:
    """Where the fingerprint goes: -o/--out DIR holds the format's file (created with the
    folder); --output FILE (the flag before -o named a folder) is that file; else stdout."""
    if args.out:
        folder = Path(args.out)
        if folder.exists() and not folder.is_dir():
            raise UserError(f"{folder} is a file, and -o/--out names a folder",
                            f"pass a folder (the fingerprint goes to {FILE_NAMES[args.format]} in it)")
        folder.mkdir(parents=True, exist_ok=True)
        return folder / FILE_NAMES[args.format]
    return Path(args.output) if args.output else None


def _image_ref(engine, value: str) -> str:
    folder = Path(value)
    if (folder / "entry.yaml").is_file():
        return build_entry(load_entry(folder), engine).image_id
    return value


def _mlperf_description(fingerprint: dict, benchmark: str) -> dict:
    """The fingerprint's fields plus the user's ``runner config`` settings; every setting
    the benchmark's checker needs and that is not set is named on stderr, never guessed."""
    fields, missing = submission_description(fingerprint, load_settings(), benchmark)
    for key in missing:
        fix = set_command(key.removeprefix("mlperf.")) if key.startswith("mlperf.") else "not in the fingerprint"
        print(f"runner: note: {key} is not set, its field is left empty: {fix}", file=sys.stderr)
    return fields


def run(args) -> int:
    from runner.fingerprint.table import render  # lazy: start-up (runner --help)

    target = _target(args)  # before any work: a bad --out fails at once
    engine = get_engine() if args.image else None
    fingerprint = capture_host(engine)
    if engine is not None:  # --image: the engine was got for it
        fingerprint["image"] = capture_image(engine, _image_ref(engine, args.image))

    if args.format == "table":
        if target is None:
            Console().print(render(fingerprint))
            return 0
        buffer = io.StringIO()
        Console(file=buffer, width=120).print(render(fingerprint))
        text = buffer.getvalue()
    else:
        data = fingerprint if args.format == "json" else _mlperf_description(fingerprint, args.mlperf_benchmark)
        text = json_text(data) + "\n"
        if target is None:
            sys.stdout.write(text)
            return 0
    try:
        target.write_text(text)
    except OSError as err:
        raise UserError(f"cannot write {target}: {err.strerror}", "choose a writable path") from None
    print(f"wrote {target}", file=sys.stderr)
    return 0
