"""``runner fingerprint``'s arguments."""

from __future__ import annotations

import argparse

# What -o/--out DIR holds, by --format (the json one is what a result records, under this name).
FILE_NAMES = {"table": "fingerprint.txt", "json": "fingerprint.json", "mlperf": "system_description.json"}

DESCRIPTION = ("Capture the host fingerprint a result records: CPU, memory, OS and kernel, "
               "NVIDIA GPUs (through NVML; a host without a driver says so), the Docker engine "
               "and, with --image, the Python/framework/CUDA versions inside an image.")


def register(p) -> None:
    p.add_argument("--format", choices=["table", "json", "mlperf"], default="table",
                   help="table (readable), json (what results record) or mlperf (system description)")
    p.add_argument("--mlperf-benchmark", choices=["training", "inference"], default="inference",
                   help="which MLPerf field set --format mlperf writes (inference = training + 3)")
    p.add_argument("--image", metavar="IMAGE_OR_ENTRY",
                   help="also probe the software in this image (tag, id, or an entry folder to build)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("-o", "--out", metavar="DIR",
                     help=f"write into DIR instead of stdout: {', '.join(FILE_NAMES.values())} by --format")
    # Before -o named a folder it named the file: old scripts' --output FILE still writes FILE.
    out.add_argument("--output", metavar="FILE", help=argparse.SUPPRESS)
