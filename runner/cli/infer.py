"""``runner infer ENTRY``: re-run only the inference phase on a result's trained model.

The new files are made in a temporary folder inside the result and swapped in only when
the harness ran to its end, so a failed re-run leaves the previous inference intact.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from runner import data, paths
from runner.cli.reproduce import loadgen_cells
from runner.errors import UserError
from runner.infer import check_backends_available, run_inference
from runner.manifest import Entry, load_entry
from runner.manifest.schema import BACKENDS
from runner.results.inference import BackendRun
from runner.results.record import Result


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "infer",
        help="re-run only the inference phase (batch-1 latency) on a result's trained model",
        description="Time each backend on every evaluation item, one at a time, inside the "
        "entry's image, using the final model of an existing result (the latest by default), "
        "and rewrite that result's inference section.",
    )
    p.add_argument("entry", help="entry folder, e.g. entries/mnist-cnn-cpu")
    p.add_argument("--backend", action="append", dest="backends", choices=BACKENDS,
                   help="backend to time (repeatable; default: the manifest's inference.backends)")
    p.add_argument("--result", type=Path, help="result folder (default: the entry's latest result)")
    p.add_argument("--threads", type=int, help="intra-op threads (default: the manifest's inference.threads)")
    p.set_defaults(func=run)


def latest_result(entry_name: str) -> Path:
    folder = paths.results_dir() / entry_name
    runs = sorted(p.parent for p in folder.glob("*/result.json"))  # run ids start with a UTC stamp
    if not runs:
        raise UserError(f"no results for {entry_name} in {folder}",
                        f"run `runner reproduce entries/{entry_name}` first, or pass --result")
    return runs[-1]


def _read_result(result_dir: Path, entry: Entry) -> Result:
    try:
        result = Result.read(result_dir)
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read {result_dir / 'result.json'}: {exc}",
                        "pass a result folder written by `runner reproduce`") from None
    if result.entry.name != entry.name:
        raise UserError(f"{result_dir} is a result of {result.entry.name}, not {entry.name}",
                        "pass the matching entry folder")
    if result.smoke:
        raise UserError(f"{result_dir} is a smoke run, whose synthetic evaluation set was not kept",
                        "re-run `runner reproduce --smoke`, or pick a full result with --result")
    weights = result_dir / "output" / entry.final_weights
    if not weights.is_file():
        raise UserError(f"{result_dir} has no trained model at {weights}",
                        "pick a result whose training completed, or run `runner reproduce` again")
    return result


def _image(client, result: Result, entry: Entry) -> str:
    """The image that trained the result: by id, else by its content-addressed tag."""
    import docker.errors

    for ref in (result.image.id, result.image.tag):
        if not ref:
            continue
        try:
            return client.images.get(ref).id
        except docker.errors.ImageNotFound:
            continue
    raise UserError(f"the image that trained this result ({result.image.tag or result.image.id}) is not in the engine",
                    f"rebuild it with `runner build entries/{entry.name}`")


def _staged(entry: Entry, result: Result):
    staged = data.staged(entry.task.id)
    recorded = result.data.digest
    if recorded and staged.digest != recorded:
        raise UserError(f"the staged {entry.task.id} data ({staged.digest}) is not the data this "
                        f"result was trained and scored on ({recorded})",
                        f"stage the same data again (`runner data prepare {entry.task.id}`)")
    return staged


def swap_in(result_dir: Path, work_dir: Path, result: Result, inference: dict[str, BackendRun]) -> None:
    """Replace ``inference/`` and ``logs/infer.log`` with the new ones, then result.json."""
    old = result_dir / f".inference-old-{work_dir.name}"
    if (result_dir / "inference").exists():
        (result_dir / "inference").rename(old)
    (work_dir / "inference").rename(result_dir / "inference")
    (result_dir / "logs").mkdir(exist_ok=True)
    (work_dir / "logs" / "infer.log").replace(result_dir / "logs" / "infer.log")
    result.inference = inference
    from runner.reproduce import check_timed_model

    check_timed_model(result, result_dir)
    result.write(result_dir)
    shutil.rmtree(old, ignore_errors=True)


def print_inference(console: Console, metric: str, inference: dict[str, BackendRun]) -> None:
    table = Table(title="inference (batch 1, every evaluation item)")
    for col in ("backend", "gate", metric, "mean ms", "p50", "p90", "p99", "max", "items/s", "$ / 10k",
                "LoadGen p50", "LoadGen p90", "LoadGen offline /s"):
        table.add_column(col)

    def fmt(value, spec):
        return "--" if value is None else format(value, spec)

    for name, rec in inference.items():
        lat = rec.latency_ms or {}
        score = rec.score(metric)
        table.add_row(
            name,
            "[green]pass[/]" if rec.passed_gate else f"[red]fail[/]: {rec.gate_reason}",
            fmt(None if score is None else score * 100, ".2f"),
            *(fmt(lat.get(k), ".4f") for k in ("mean", "p50", "p90", "p99", "max")),
            fmt(rec.throughput_per_s, ".0f"), fmt(rec.cost_per_10k_usd, ".3g"),
            *loadgen_cells(rec),
        )
    console.print(table)


def run(args) -> int:
    from runner.engine import get_client
    from runner.bundle import sign_folder
    from runner.profiles import load_profile

    console = Console()
    entry = load_entry(args.entry)
    backends = args.backends or list(entry.inference.backends)
    check_backends_available(backends)  # before any work: GPU backends need a GPU host
    if args.threads is not None and args.threads < 1:
        raise UserError("--threads must be at least 1", "pass --threads 1 or more")
    result_dir = Path(args.result).resolve() if args.result else latest_result(entry.name)
    result = _read_result(result_dir, entry)
    earlier = set(result.inference)
    profile = load_profile(entry.hardware_profile)
    staged = _staged(entry, result)
    client = get_client()
    image_id = _image(client, result, entry)

    console.print(f"[bold]infer[/] {entry.name} {', '.join(backends)} on {result_dir.name}")
    work_dir = Path(tempfile.mkdtemp(prefix=".infer-", dir=result_dir))
    try:
        inference = run_inference(client, entry, image_id, result_dir, staged, backends, profile,
                                  threads=args.threads, work_dir=work_dir)
        print_inference(console, entry.task.metric, inference)
        failed = {name: rec.error for name, rec in inference.items() if rec.error}
        if failed:
            log = result_dir / "logs" / "infer-failed.log"
            log.parent.mkdir(exist_ok=True)
            shutil.copyfile(work_dir / "logs" / "infer.log", log)
            raise UserError(
                "inference failed for " + "; ".join(f"{b}: {why}" for b, why in failed.items())
                + f". The previous inference of {result_dir.name} is kept",
                f"see {log}",
            )
        swap_in(result_dir, work_dir, result, inference)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    console.print(f"rewrote {result_dir / 'result.json'} (inference) and {result_dir / 'inference'}")
    if replaced := sorted(earlier - set(inference)):
        console.print(f"the earlier inference phase ({', '.join(replaced)}) was replaced by this one")
    # The result changed, so its bundle must be re-made, or verify would rightly refuse it.
    sign_folder(result_dir, console)
    return 0 if all(rec.passed_gate for rec in inference.values()) else 1
