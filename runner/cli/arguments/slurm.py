"""The ``--slurm`` flags shared by ``runner reproduce``, ``runner study`` and ``runner drift``
(``runner.slurm.options_from_args`` reads them)."""

from __future__ import annotations


def add_arguments(parser) -> None:
    parser.add_argument("--slurm", action="store_true",
                        help="run each run as a task of one Slurm job array; RUNNER_RESULTS must "
                        "be on a file system every node shares (docs/cluster.md)")
    parser.add_argument("--partition", help="Slurm partition for --slurm (default: the cluster's)")
    parser.add_argument("--slurm-arg", action="append", default=[], metavar="ARG",
                        help="extra sbatch flag for --slurm, e.g. --slurm-arg=--gres=gpu:8 "
                        "(repeatable)")
