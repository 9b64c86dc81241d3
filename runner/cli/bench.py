"""``runner bench NAME``: benchmarks that print figures (targets are never asserted in tests).

Each benchmark is a module ``runner/bench/<name>.py`` with a ``run(args) -> int``, and a row of
``runner.bench.BENCHMARKS`` (its help, description and options); ``runner.cli.arguments.bench``
adds the options, this runs the benchmark named.
"""

from __future__ import annotations

import importlib


def run(args) -> int:
    return importlib.import_module(f"runner.bench.{args.bench_name}").run(args)
