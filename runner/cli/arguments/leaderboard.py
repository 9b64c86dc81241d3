"""``runner leaderboard``'s arguments."""

from runner.cli.argtypes import results_arguments
from runner.tasks import TASKS

DESCRIPTION = ("Build DAWNBench's leaderboard tables (training time and cost, inference latency and cost) "
               "from imported claims (runner import dawnbench) and reproduced results; a reproduction counts only "
               "when it is signed by a trusted key, intact, complete and conforming.")


def register(p) -> None:
    p.add_argument("--html", metavar="OUT_DIR",
                   help="also write a site you can publish here: an index, a page per task and per reproduction "
                   "(curves, latencies, fingerprints, signed bundles, the verify command); relative links only")
    p.add_argument("--task", action="append", choices=sorted(TASKS), help="only this task's tables (repeatable)")
    p.add_argument("--top", type=int, metavar="N", help="print only the first N rows of each table")
    results_arguments(p, "the tables, their rows' raw figures and every reproduction's verdict")
