"""Benchmarks behind ``runner bench``: one module per benchmark, with a row here.

A benchmark module defines ``run(args) -> int`` (measure, print figures with rich). Its row in
``BENCHMARKS`` gives its one line in ``runner bench --help``, the description its own --help
starts with, and its options (argparse only: ``runner bench --help`` imports no benchmark).
Add a module and its row below.
"""

from __future__ import annotations

from collections import namedtuple

DEFAULT_ENTRY = "entries/mnist-cnn-cpu"

Benchmark = namedtuple("Benchmark", "help description options")


def _build(p) -> None:
    p.add_argument("entry", nargs="?", default=DEFAULT_ENTRY, help=f"entry folder (default {DEFAULT_ENTRY})")
    p.add_argument("--warm-runs", type=int, default=3, help="warm rebuilds to time")


def _tta(p) -> None:
    p.add_argument("entry", nargs="?", default=DEFAULT_ENTRY)
    p.add_argument("--runs", type=int, default=3, help="runs for the TTA median (default 3)")
    p.add_argument("--pairs", type=int, default=2,
                   help="host/container pairs for the speed comparison (default 2)")


def _latency(p) -> None:
    p.add_argument("entry", nargs="?", default=DEFAULT_ENTRY, help=f"entry folder (default {DEFAULT_ENTRY})")
    p.add_argument("--items", type=int, default=2000, help="evaluation items timed per backend")
    p.add_argument("--warmup", type=int, default=200, help="untimed items first")
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="intra-op thread counts to sweep")


def _overhead(p) -> None:
    p.add_argument("entry", nargs="?", default=DEFAULT_ENTRY)
    p.add_argument("--pairs", type=int, default=5, help="runner/plain pairs, interleaved (default 5)")
    p.add_argument("--seed", type=int, default=0, help="seed of the first pair (default 0)")


def _tree(p) -> None:
    p.add_argument("--images", type=int, default=50_000, help="JPEGs in the tree (default 50,000)")
    p.add_argument("--classes", type=int, default=100, help="class folders (default 100)")
    p.add_argument("--size", type=int, default=32, help="side of each JPEG in pixels (default 32)")


def _cli(p) -> None:
    p.add_argument("--runs", type=int, default=20, help="times each command is started (default 20)")
    p.add_argument("--tree", metavar="DIR",
                   help="time the runner of another checkout (put first on PYTHONPATH), e.g. the tree "
                   "before a change (default: this one)")


def _readers(p) -> None:
    p.add_argument("entry", nargs="?", default=DEFAULT_ENTRY, help=f"entry folder (default {DEFAULT_ENTRY})")
    p.add_argument("--sparse-gib", type=int, default=4, help="apparent size of the sparse file (default 4 GiB)")
    p.add_argument("--text-mb", type=int, default=16, help="size of the text file (default 16 MB)")
    p.add_argument("--small-files", type=int, default=20_000, help="small files (default 20,000)")
    p.add_argument("--part", choices=("all", "entry", "views"), default="all",
                   help="entry: the information check only; views: runner ls and show only (default all)")
    p.add_argument("--runs", type=int, default=100, help="signed runs runner ls lists (default 100)")
    p.add_argument("--repeat", type=int, default=5, help="warm starts of ls and show timed, median (default 5)")
    p.add_argument("--before", metavar="DIR",
                   help="another checkout (e.g. the tree before a change) timed beside this one on the same runs")


def _engines(p) -> None:
    p.add_argument("entry", nargs="?", default=DEFAULT_ENTRY, help=f"entry folder (default {DEFAULT_ENTRY})")
    p.add_argument("--engines", default="docker,podman,charliecloud", metavar="A,B",
                   help="engines to compare, comma-separated (default docker,podman,charliecloud)")
    p.add_argument("--freezes", type=int, default=30, help="freezes (and thaws) timed per engine (default 30)")
    p.add_argument("--skip-build", action="store_true", help="no cold build")
    p.add_argument("--skip-reproduce", action="store_true", help="no runner reproduce")
    p.add_argument("--full", action="store_true",
                   help="time the entry's real run instead of `runner reproduce --smoke` (about 6 min under load here)")
    p.add_argument("--json", action="store_true", help="the figures as JSON on stdout")


def _entry_only(p) -> None:
    p.add_argument("entry", nargs="?", default=DEFAULT_ENTRY, help=f"entry folder (default {DEFAULT_ENTRY})")


BENCHMARKS: dict[str, Benchmark] = {
    "build": Benchmark(
        "cold and warm build time of an entry image",
        "Build an entry's image with no layer cache (cold), then again (warm), and after a change to "
        "one of its files; the warm build's target is under 5 s.", _build),
    "tta": Benchmark(
        "TTA (median of N), the runner's overhead, and host-vs-container training speed",
        "Reproduce an entry N times for the median TTA, time the runner's work around training, and "
        "compare training on the host's Python with training in the container.", _tta),
    "latency": Benchmark(
        "batch-1 p50 latency of torch and onnxruntime on the default entry's model, and their ratio",
        "Run the harness on this host's Python (it needs torch, onnx and onnxruntime installed here: the "
        "test extra) and time batch-1 inference of each CPU backend at each thread count; the target is "
        "onnxruntime at half torch's p50 or less.", _latency),
    "overhead": Benchmark(
        "the runner against a plain `docker run` of the same training (pairs; ratio min/median/max)",
        "Time `runner reproduce --no-infer` against a plain container run of the same training, in "
        "interleaved pairs, with where the difference goes phase by phase; the median ratio's target is 1.05 or lower.", _overhead),
    "tree": Benchmark(
        "import and per-run check time of a JPEG training tree (ImageNet layout)",
        "Make a tar of JPEGs in ImageNet's layout and time importing it as a training tree and the "
        "check each run makes, against tar plus sha256sum by hand.", _tree),
    "cli": Benchmark(
        "start-up time of the command line: runner --help against python3 -c pass",
        "Start `runner --help`, `runner reproduce --help` and `runner verify --help` N times each, "
        "beside `python3 -c pass` and `python3 -c \"import runner\"`, and print each one's median; "
        "the target for every --help is 0.25 s.", _cli),
    "readers": Benchmark(
        "the information check of an entry and hostile copies; runner ls and show over 100 signed runs",
        "Run the information check (entry_files, measure_entry) of the default entry and of three hostile "
        "copies, each in a fresh interpreter, and print its time and peak memory beside issue 46's targets: "
        "the entry under 1 s; the sparse file refused under 1 s and 100 MiB; the text and the files under 5 s. "
        "Then `runner ls` and `runner show` over 100 signed runs (the test suite's synthetic ones: a checkout "
        "with tests/), cold (nothing cached) and warm, against issue 50's 0.3 s (and --before's tree).",
        _readers),
    "engines": Benchmark(
        "docker, podman and charliecloud side by side: cold build, runner reproduce, freeze latency",
        "For each engine in turn: a copy of the entry built with no cache, `runner reproduce --smoke` "
        "(--full: the real run) timed as a user starts it (first run after the build, then warm), and a container busy in a CPU "
        "loop frozen and thawed N times (request to paused / running: p50, p90, max). An engine this host "
        "lacks is reported as not available, with why.", _engines),
    "inspect": Benchmark(
        "the image inspection of a first and a second image sharing their lower layers: seconds and bytes parsed",
        "Build the entry's image and a second image on it with one small layer more, then inspect each with an "
        "empty cache: the second should parse only its own layer (issue 50).", _entry_only),
}
