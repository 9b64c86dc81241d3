"""``runner compare``: DAWNBench's side-by-side view of signed results.

One ``RunFigures`` per result folder (``figures``), read through the typed result and its
host-stamped events; ``summarise`` groups the runs of each entry (median and coefficient of
variation); ``table`` and ``plot`` show them. Which runs are compared is the verdict's
(``runner.verify.verdict``, read by ``runner.cli.compare``), never judged here.
"""

from runner.compare.figures import RunFigures, figures
from runner.compare.summary import EntrySummary, Stat, summarise

__all__ = ["EntrySummary", "RunFigures", "Stat", "figures", "summarise"]
