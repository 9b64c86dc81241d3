"""``runner bench NAME``: benchmarks that print figures (targets are never asserted in tests).

Each benchmark is a module ``runner/bench/<name>.py`` listed in ``runner.bench.BENCHMARKS``
with a ``register(parser)`` for its options and a ``run(args) -> int``.
"""

from __future__ import annotations

import importlib

from runner.bench import BENCHMARKS


def register(subparsers) -> None:
    p = subparsers.add_parser("bench", help="run a benchmark and print its figures")
    sub = p.add_subparsers(dest="bench_name", metavar="BENCHMARK", required=True)
    for name in BENCHMARKS:
        module = importlib.import_module(f"runner.bench.{name}")
        bench = sub.add_parser(name, help=module.HELP)
        module.register(bench)
        bench.set_defaults(func=module.run)
