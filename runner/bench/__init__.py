"""Benchmarks behind ``runner bench``: one module per benchmark, named here.

A benchmark module defines ``HELP`` (one line), ``register(parser)`` (its options) and
``run(args) -> int`` (measure, print figures with rich). Add a module and its name below.
"""

BENCHMARKS: list[str] = [
    "build",  # cold and warm build time of an entry image
    "tta",  # TTA median of N, runner overhead, host vs container speed
    "latency",  # batch-1 p50 of torch vs onnxruntime on the default entry's model
    "overhead",  # the runner against a plain docker run of the same training (ratio)
    "tree",  # import and per-run check of a JPEG training tree, against tar + sha256sum
]
