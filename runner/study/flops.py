"""Count the FLOPs (and bytes touched) of one training step and one batch-1 inference of an
entry's model, inside a container of the entry's own image.

No entry code runs on the host: the runner's harness (``python3 -m harness flops``,
``runner/harness/flops.py``) builds the model with the manifest's builder and counts with
``torch.utils.flop_counter.FlopCounterMode`` in a container locked down like every other the
runner starts (no network, non-root, read-only root, no capabilities, owner labels). The
image is the run's (``result.json`` ``image.id``); when the engine no longer has it, the image
its tag names (the same content key) is used, else the run's own entry files are rebuilt by
``runner reproduce``'s build (``build_entry``).

The numbers come back from code the entry controls (its builder, its torch), so they are the
entry's to forge: ``parse_count`` accepts only finite, non-negative integers under a cap, and
the study says who counted them.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from runner.engine.containers import Mount, prepare_writable
from runner.engine.interface import Engine
from runner.errors import RunnerError, UserError
from runner.frameworks import FRAMEWORKS
from runner.report import reporter
from runner.entry_build import build_entry
from runner.manifest import load_entry
from runner.run.sandbox import read_small_text
from runner.study.sandbox import HarnessJob, harness_limits, run_harness, threads_of

OUT_MOUNT = "/flops"
RESULT_FILE = "flops.json"  # as runner/harness/flops.py writes it
COUNT_TIMEOUT_S = 600
MAX_RESULT_BYTES = 64 * 1024
OUT_QUOTA_BYTES = 1 << 20  # the writable folder holds one small JSON file: the host's disk is not the entry's
# Far above any model a DAWNBench task trains (ResNet-50 at batch 1024: ~2.5e13 FLOPs a step).
MAX_COUNT = 10**18
MAX_PARAMETERS = 10**13
MAX_VERSION_CHARS = 64
VERSION = re.compile(r"[A-Za-z0-9.+_-]{1,%d}" % MAX_VERSION_CHARS)  # shown in terminal markup and HTML
COUNTED_BY = "the entry's own image"


@dataclass(frozen=True)
class CountImage:
    """The image the count ran in: the run's, or one rebuilt from the run's entry files."""

    id: str
    rebuilt: bool


# -- the numbers the container returns: untrusted ---------------------------------------------

class CountError(RunnerError, ValueError):
    """The entry's image returned a count that is not one."""

    default_fix = "rebuild the entry's image (`runner build`) so that it runs the runner's harness unmodified"


def _reject_constant(name: str):
    raise CountError(f"{name} is not a number")


def _bounded_int(value: object, what: str, cap: int) -> int:
    # bool is an int in Python, a float may be inf or nan: only plain integers pass.
    if type(value) is not int:
        raise CountError(f"{what} is not an integer")
    if not 0 <= value <= cap:
        raise CountError(f"{what} is outside 0..{cap:.0e}")
    return value


def _measure(data: object, what: str) -> dict:
    if not isinstance(data, dict):
        raise CountError(f"{what} is not an object")
    flops = _bounded_int(data.get("flops"), f"{what}.flops", MAX_COUNT)
    touched = _bounded_int(data.get("bytes"), f"{what}.bytes", MAX_COUNT)
    if flops == 0 or touched == 0:
        raise CountError(f"{what} counted {flops} FLOPs over {touched} bytes: no matrix product or "
                         "convolution to set on a roofline")
    return {"flops": flops, "bytes": touched}


def parse_count(text: str, batch: int) -> dict:
    """The count, rebuilt from ``text`` field by field: only the known keys, each bounded.
    ``batch`` is the host's own choice, never the echoed one."""
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise CountError(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise CountError("not a JSON object")
    version = data.get("torch")
    if not isinstance(version, str) or not VERSION.fullmatch(version):
        raise CountError(f"torch is not a version string (at most {MAX_VERSION_CHARS} of A-Z a-z 0-9 . + _ -)")
    return {
        "batch_size": batch,
        "parameters": _bounded_int(data.get("parameters"), "parameters", MAX_PARAMETERS),
        "train_step": _measure(data.get("train_step"), "train_step"),
        "inference_item": _measure(data.get("inference_item"), "inference_item"),
        "torch": version,
    }


def read_result(folder: Path) -> str:
    """``folder/flops.json`` as text, read without following links or blocking on a FIFO the
    container may have put there, and only if it is a small regular file."""
    try:
        return read_small_text(folder / RESULT_FILE, MAX_RESULT_BYTES)
    except ValueError as exc:
        raise CountError(str(exc)) from None


# -- the image and the container -------------------------------------------------------------

def run_image(engine: Engine, run_folder: Path, entry_name: str, image_id: str, image_tag: str | None,
              smoke: bool) -> CountImage:
    """The run's image; else the image its tag names now (the same content key: the same entry
    files, base and lock, built again, e.g. by `runner build`); else the run's own entry files
    rebuilt the way ``runner reproduce`` builds them."""
    if (found := engine.find_image(image_id)) is not None:
        return CountImage(found.id, rebuilt=False)
    if image_tag and (found := engine.find_image(image_tag)) is not None:
        return CountImage(found.id, rebuilt=True)
    files = run_folder / "entry"
    if not all((files / name).is_file() for name in ("entry.yaml", "Dockerfile")):
        raise UserError(f"the run's image {image_id[:19]} is gone from the engine and {run_folder} holds no entry "
                        "files to rebuild it from",
                        f"rebuild it with `runner build entries/{entry_name}` (the entry as the run used it)")

    reporter().print(f"the run's image {image_id[:19]} is gone from the engine: rebuilding it from the run's entry files")
    with tempfile.TemporaryDirectory(prefix="runner-flops-build-") as tmp:
        folder = Path(tmp) / entry_name  # load_entry wants the folder named as the entry
        shutil.copytree(files, folder, symlinks=True)  # load_entry refuses links by name
        entry = load_entry(folder)
        if smoke:
            entry = entry.for_smoke()
        built = build_entry(entry, engine)  # a failure says what to fix in the build
    return CountImage(built.image_id, rebuilt=True)


def count_in_container(engine: Engine, image: CountImage, *, builder: str, framework: str,
                       input_shape, num_classes: int, batch: int, cpus: float | None = None,
                       memory: str | int | None = None, log_path: Path | None = None) -> dict:
    """Run ``python3 -m harness flops`` in ``image`` and return the bounded, parsed count,
    with ``counted_by`` and ``image`` saying where it came from."""
    declared = FRAMEWORKS.get(framework)
    if declared is None or declared.flop_counter is None:
        counting = [f for f in FRAMEWORKS.values() if f.flop_counter]
        counters = [counter for f in counting if (counter := f.flop_counter)]
        raise UserError(f"the roofline study counts FLOPs with {' or '.join(counters)}; "
                        f"this entry's framework is {framework}",
                        f"run it on a {' or '.join(f.label for f in counting)} entry")
    threads = threads_of(cpus)
    with tempfile.TemporaryDirectory(prefix="runner-flops-") as tmp:
        out = Path(tmp) / "out"
        prepare_writable(out)
        run_harness(engine, image.id, HarnessJob(
            arguments=["flops", "--entry-dir", "/entry", "--builder", builder, "--framework", framework,
             "--input-shape", ",".join(str(int(d)) for d in input_shape), "--num-classes", str(int(num_classes)),
             "--batch", str(int(batch)), "--threads", str(threads), "--out", OUT_MOUNT],
            mounts=[Mount(out, OUT_MOUNT, read_only=False)], out=out, quota_bytes=OUT_QUOTA_BYTES,
            limits=harness_limits(cpus, memory, COUNT_TIMEOUT_S), label="flops", log_path=log_path,
            what=f"counting the FLOPs of {builder}", fix="check that the builder builds its model in the image",
        ))
        try:
            counted = parse_count(read_result(out), batch)
        except CountError as err:
            raise UserError(f"the entry's image {image.id[:19]} returned no valid FLOP count: {err}",
                            "the count is the entry's own code's answer; check its builder") from None
    return {**counted, "counted_by": COUNTED_BY, "image": {"id": image.id, "rebuilt": image.rebuilt}}
