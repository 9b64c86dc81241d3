"""``runner fingerprint``: describe this host (and optionally an image's software)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rich.console import Console

from runner.engine.client import get_client
from runner.entry_build import build_entry
from runner.errors import UserError
from runner.fingerprint import capture_host, capture_image
from runner.manifest import load_entry
from runner.mlperf.config import load_settings, set_command
from runner.mlperf.system import submission_description


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "fingerprint",
        help="describe this host's CPU, memory, OS, GPUs and Docker engine",
        description=(
            "Capture the host fingerprint a result records: CPU, memory, OS and kernel, "
            "NVIDIA GPUs (through NVML; a host without a driver says so), the Docker engine "
            "and, with --image, the Python/framework/CUDA versions inside an image."
        ),
    )
    p.add_argument("--format", choices=["table", "json", "mlperf"], default="table",
                   help="table (readable), json (what results record) or mlperf (system description)")
    p.add_argument("--mlperf-benchmark", choices=["training", "inference"], default="inference",
                   help="which MLPerf field set --format mlperf writes (inference = training + 3)")
    p.add_argument("--image", metavar="IMAGE_OR_ENTRY",
                   help="also probe the software in this image (tag, id, or an entry folder to build)")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    p.set_defaults(func=run)


def _image_ref(client, value: str) -> str:
    folder = Path(value)
    if (folder / "entry.yaml").is_file():
        return build_entry(load_entry(folder), client).image_id
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

    client = None
    if args.image:
        client = get_client()
    fingerprint = capture_host(client)
    if args.image:
        fingerprint["image"] = capture_image(client, _image_ref(client, args.image))

    if args.format == "table":
        if args.output:
            with open(args.output, "w") as fh:
                Console(file=fh, width=120).print(render(fingerprint))
        else:
            Console().print(render(fingerprint))
        return 0
    if args.format == "json":
        data = fingerprint
    else:
        data = _mlperf_description(fingerprint, args.mlperf_benchmark)
    text = json.dumps(data, indent=2) + "\n"
    if args.output:
        try:
            Path(args.output).write_text(text)
        except OSError as err:
            raise UserError(f"cannot write {args.output}: {err.strerror}", "choose a writable path") from None
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
