"""``runner show``'s arguments."""

from runner.cli.argtypes import results_arguments

DESCRIPTION = ("Show RUN (a run id, its short form such as s5-c0997d, ENTRY/SHORT_ID, a run folder or "
               "a bundle's .tar.gz): status, TTA, cost, conforming, verified, inference, the time-to-accuracy "
               "curve drawn in the terminal, and the run's files.")


def register(p) -> None:
    p.add_argument("run", help="a run id (or its short form, or ENTRY/SHORT_ID), a run folder or a .tar.gz")
    results_arguments(p, "the run (full run id, paths, curve)")
