"""``runner bench``'s arguments: one action per benchmark of ``runner.bench.BENCHMARKS``."""

from runner.bench import BENCHMARKS

DESCRIPTION = ("Run a benchmark and print its figures beside its target (benchmarks measure; the "
               "tests never assert their targets).")


def register(p) -> None:
    sub = p.add_subparsers(dest="bench_name", metavar="BENCHMARK", required=True)
    for name, bench in BENCHMARKS.items():
        bench.options(sub.add_parser(name, help=bench.help, description=bench.description))
