"""``runner node-agent`` (hidden): one node of a run spanning nodes, started by the run's
runner through ``srun`` (runner.run.node_agent). Not for people to call."""

from __future__ import annotations

import os

from runner.errors import UserError
from runner.run.control import TOKEN_ENV


def run(args) -> int:
    from runner.run.node_agent import run_agent  # lazy: start-up (runner --help)

    token = os.environ.get(TOKEN_ENV)
    node = args.node if args.node is not None else int(os.environ.get("SLURM_PROCID", "-1")) + 1
    if not token or node < 1:
        raise UserError("runner node-agent is started by a run spanning nodes, through srun",
                        "run `runner reproduce ENTRY --slurm` instead")
    return run_agent(args.control, token, node)
