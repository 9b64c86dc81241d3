"""The run's initial weights, drawn by the runner and handed to training (issue 44).

The model's tensors come from the entry's builder, run in the evaluator's sandbox before the
clock (``python3 -m harness init-shapes``): names and shapes only, bounded; no value comes
from the entry. They depend on the image alone, so they are kept in the runner's home by the
image's id (a second run of the same image asks nothing). The values are drawn on the host
(``runner.initial_weights``, where the rules are) into the run's ``init/`` folder
(``weights.npz``, ``init.json``, and ``runner_init.py``, the one-line loader of
``init_loader/``), mounted read-only at ``/init`` in every training container of the run.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import math
import shutil
import tempfile
from pathlib import Path

import numpy as np

from runner import paths
from runner.engine.containers import Mount, prepare_writable
from runner.errors import UserError
from runner.initial_weights import (
    INIT_DIR, INIT_RECORD, INIT_WEIGHTS, MAX_ELEMENTS, MAX_TENSORS, Tensor, assign_roles, draw, record,
)
from runner.run.sandbox import HarnessJob, harness_limits, read_small_json, run_harness

INIT_MOUNT = "/init"
LOADER = Path(__file__).parent / "init_loader" / "runner_init.py"
SHAPES_TIMEOUT_S = 300
SHAPES_QUOTA_BYTES = 4 << 20
SHAPES_FILE = "tensors.json"  # as runner/harness/init_shapes.py writes it


class InitError(UserError):
    """The entry's model cannot be given the runner's initial weights."""


# -- the shapes, from the entry's builder in the sandbox -----------------------------------

def _parse_shapes(data: object) -> list[tuple[str, tuple[int, ...]]]:
    if not isinstance(data, dict) or not isinstance(data.get("tensors"), list):
        raise ValueError("no tensor list")
    listed, total, seen = [], 0, set()
    if len(data["tensors"]) > MAX_TENSORS:
        raise ValueError(f"over {MAX_TENSORS} tensors")
    for t in data["tensors"]:
        name, shape = (t.get("name"), t.get("shape")) if isinstance(t, dict) else (None, None)
        if not isinstance(name, str) or not 0 < len(name) <= 512 or not name.isprintable() or name in seen:
            raise ValueError("a tensor without a printable, unique name")
        if not isinstance(shape, list) or not shape or not all(type(d) is int and d > 0 for d in shape):
            raise ValueError(f"tensor {name!r} has no shape")
        total += math.prod(shape)
        if total > MAX_ELEMENTS:
            raise ValueError(f"over {MAX_ELEMENTS:,} elements")
        seen.add(name)
        listed.append((name, tuple(shape)))
    return listed  # none at all: nothing to draw, and the run is named for it (undrawn_problem)


def _cache_path(image: str, builder: str, framework: str, input_shape) -> Path:
    key = hashlib.sha256(json.dumps([image, builder, framework, list(input_shape or ()),
                                     LOADER.read_bytes().hex()[:64]]).encode()).hexdigest()
    return paths.home() / "init-shapes" / f"{key}.json"


def model_tensors(engine, image: str, entry, limits, log_path: Path | None) -> list[tuple[str, tuple[int, ...]]]:
    """The names and shapes of ``entry``'s untrained model (its builder, in the sandbox, under
    ``limits``), kept by the image's id: the builder's answer depends on the image alone."""
    builder, framework, input_shape = entry.inference.builder, entry.framework["name"], entry.task.input_shape
    cache = _cache_path(image, builder, framework, input_shape)
    try:
        return _parse_shapes(json.loads(cache.read_text()))
    except (OSError, ValueError):
        pass
    shape = ",".join(str(int(d)) for d in (input_shape or (1,)))
    with tempfile.TemporaryDirectory(prefix="runner-init-shapes-") as tmp:
        out = Path(tmp) / "out"
        prepare_writable(out)
        run_harness(engine, image, HarnessJob(
            arguments=["init-shapes", "--entry-dir", "/entry", "--builder", builder, "--framework", framework,
             "--input-shape", shape, "--out", "/out"],
            mounts=[Mount(out, "/out", read_only=False)], out=out, quota_bytes=SHAPES_QUOTA_BYTES,
            limits=harness_limits(limits.cpus, limits.memory, SHAPES_TIMEOUT_S),
            label="init-shapes", log_path=log_path, what=f"listing the tensors of the model {builder} builds",
            fix="check that the builder builds its model in the image"))
        try:
            listed = _parse_shapes(read_small_json(out / SHAPES_FILE, SHAPES_QUOTA_BYTES))
        except ValueError as exc:
            raise InitError(f"the entry's builder {builder} gave no usable tensor list: {exc}",
                            "the runner draws the initial value of every float tensor the builder's model has; "
                            "check the builder") from None
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({"tensors": [{"name": n, "shape": list(s)} for n, s in listed]}))
    return listed


def write_init(folder: Path, tensors: list[Tensor], seed: int, framework: str) -> dict:
    """Draw the run's initial weights into ``folder`` (``weights.npz``, ``init.json``, the
    loader); returns the record."""
    values = draw(tensors, seed, framework)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / INIT_WEIGHTS, "wb") as f:
        np.savez(f, **values)  # type: ignore[arg-type]  # numpy's stub takes a name for its allow_pickle
    shutil.copyfile(LOADER, folder / LOADER.name)
    data = record(tensors, seed, framework, values)
    (folder / INIT_RECORD).write_text(json.dumps(data, indent=1) + "\n")
    return data


def roles_for(listed, framework: str, declared: tuple[tuple[str, str], ...], has_public: bool,
              public_width: int | None = None) -> list[Tensor]:
    """The tensors with their roles, refused in one line when the roles break the rules."""
    tensors = assign_roles(listed, framework, declared)
    names = {n for n, _ in listed}
    unused = [p for p, _ in declared if not any(fnmatch.fnmatchcase(n, p) for n in names)]
    if unused:
        raise InitError(f"entry.yaml's initial_weights names no tensor of the model: {', '.join(unused[:4])}",
                        f"the model's tensors are {', '.join(sorted(names)[:6])}...; fix the globs")
    public = [t for t in tensors if t.role == "public"]
    if public and not has_public:
        raise InitError(f"{public[0].name} is declared a public input, but the entry declares none",
                        "declare the task's public input in public_inputs, or draw the tensor")
    if wrong := [t for t in public if not is_word_table(t.shape, public_width)]:
        raise InitError(f"{wrong[0].name} {list(wrong[0].shape)} is declared a public input, but it is no table of "
                        f"the public input's vectors (width {public_width}, at least {MIN_TABLE_ROWS:,} rows)",
                        "draw it: only a word table the public input fills may start from it")
    return tensors


MIN_TABLE_ROWS = 1000  # a word table of the public input's vectors: a vocabulary, not a layer


def is_word_table(shape: tuple[int, ...], width: int | None) -> bool:
    return width is not None and len(shape) == 2 and shape[1] == width and shape[0] >= MIN_TABLE_ROWS


def ensure_init(plan) -> Path | None:
    """The run's init folder (drawn now unless it already is: another node draws the same
    values from the same plan); None for a plan without tensors (a run from before the draw)."""
    if not plan.initial:
        return None
    folder = plan.result_dir / INIT_DIR
    if not (folder / INIT_RECORD).is_file():
        write_init(folder, [Tensor(n, tuple(s), r) for n, s, r in plan.initial], plan.seed,
                   plan.entry.framework["name"])
    return folder
