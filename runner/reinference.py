"""Re-run only the inference phase on an existing result's trained model (``runner reinfer``).

A result is re-inferred in place: its latest (or a given) folder is checked to hold a
trained model of the same entry, the image that trained it times each backend, and the
result's inference section is rewritten and the folder re-signed. The new files are made
in a temporary folder inside the result and swapped in only when the harness ran to its
end, so a failed re-run leaves the previous inference intact. The command line parses its
flags, calls ``reinfer`` and renders what it returns.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


from runner import data, paths
from runner.errors import UserError
from runner.inference import check_backends_available, run_inference
from runner.manifest import Entry, load_entry
from runner.results.inference import BackendRun
from runner.results.record import Result
from runner.results import assemble
from runner.score.timed_model import check_timed_model
from runner.report import reporter


@dataclass(frozen=True)
class ReinferenceOutcome:
    """A re-inferred result: its folder, the task's metric and the new inference records."""

    result_dir: Path
    metric: str
    inference: dict[str, BackendRun]
    replaced: list[str]  # backends of the earlier inference phase this one did not time again

    @property
    def passed(self) -> bool:
        """Every backend passed the threshold gate (a latency that may be claimed)."""
        return all(rec.passed_gate for rec in self.inference.values())


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
    assemble.inferred(result, inference, check_timed_model(result, inference, result_dir))
    result.write(result_dir)
    shutil.rmtree(old, ignore_errors=True)


def reinfer(entry_path: str, *, result_dir: Path | None = None,
            backends: list[str] | None = None, threads: int | None = None,
            on_timed: Callable[[str, dict[str, BackendRun]], None] | None = None) -> ReinferenceOutcome:
    """Time ``backends`` (default: the manifest's) on ``result_dir`` (default: the entry's
    latest result), rewrite its inference section and re-sign it. ``on_timed(metric,
    inference)`` sees the new records as soon as the harness ran, before they are judged:
    a failed backend raises ``UserError`` after it, keeping the previous inference."""
    from runner.bundle import sign_folder
    from runner.engine import get_client
    from runner.profiles import load_profile

    entry = load_entry(entry_path)
    backends = backends or list(entry.inference.backends)
    check_backends_available(backends)  # before any work: GPU backends need a GPU host
    if threads is not None and threads < 1:
        raise UserError("--threads must be at least 1", "pass --threads 1 or more")
    result_dir = Path(result_dir).resolve() if result_dir else latest_result(entry.name)
    result = _read_result(result_dir, entry)
    earlier = set(result.inference)
    profile = load_profile(entry.hardware_profile)
    staged = _staged(entry, result)
    client = get_client()
    image_id = _image(client, result, entry)

    reporter().print(f"[bold]infer[/] {entry.name} {', '.join(backends)} on {result_dir.name}")
    work_dir = Path(tempfile.mkdtemp(prefix=".infer-", dir=result_dir))
    try:
        inference = run_inference(client, entry, image_id, result_dir, staged, backends, profile,
                                  threads=threads, work_dir=work_dir)
        if on_timed is not None:
            on_timed(entry.task.metric, inference)
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
    reporter().print(f"rewrote {result_dir / 'result.json'} (inference) and {result_dir / 'inference'}")
    replaced = sorted(earlier - set(inference))
    if replaced:
        reporter().print(f"the earlier inference phase ({', '.join(replaced)}) was replaced by this one")
    # The result changed, so its bundle must be re-made, or verify would rightly refuse it.
    sign_folder(result_dir)
    return ReinferenceOutcome(result_dir, entry.task.metric, inference, replaced)
