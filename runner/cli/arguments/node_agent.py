"""``runner node-agent``'s arguments (not listed: the run's runner starts it through srun)."""

DESCRIPTION = ("One node of a run spanning nodes, started by the run's runner through srun "
               "(runner.run.node_agent); not for people to call: use `runner reproduce ENTRY --slurm`.")


def register(parser) -> None:
    parser.add_argument("--control", required=True, help="host:port of the run's runner")
    parser.add_argument("--node", type=int, help="this node's index in the run (default: srun's task + 1)")
