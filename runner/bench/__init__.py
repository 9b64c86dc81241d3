"""Benchmarks behind ``runner bench``: one module per benchmark, named here.

A benchmark module defines ``HELP`` (one line), ``register(parser)`` (its options) and
``run(args) -> int`` (measure, print figures with rich). Add a module and its name below.
"""

BENCHMARKS: list[str] = [
    "build",  # cold and warm build time of an entry image
]
