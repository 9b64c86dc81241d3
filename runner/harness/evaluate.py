"""``python3 -m harness evaluate``: the runner's evaluator, one per training run.

Started by the runner just before the entry and frozen once ready, so that an evaluation
costs only the forward passes. For request ``n`` the runner writes ``REQUESTS/n.json`` (the
checkpoint to load); the evaluator rebuilds the model with the manifest's builder, loads
the checkpoint, predicts every item of each input set (the clean evaluation inputs and the
runner's perturbed probe) with the loader of the manifest's framework (``--framework``; see
``frameworks/``) and writes ``OUT/n/<set>.npy``, then prints ``evaluation_done``; the runner
copies the answer out of ``OUT`` before it asks again. For a task whose inputs are questions
(``--kind questions``: SQuAD) each set is ``examples.jsonl`` and the answers go to
``OUT/n/<set>.json`` as ``{question id: answer}`` (``questions.py``). The host stamps, scores and times
everything; this process only computes predictions. It never sees labels.

Two more things per request. ``model_built`` is printed once the builder returned and the
checkpoint is loaded: the host bounds the time to it (the builder's time is excluded from
the clock, so it may not be spent training). While predicting, the loader notes every
tensor the model computes with (``provenance.py``) into ``OUT/n/provenance.json``. A
request with ``shuffle_seed`` is the host's sensitivity check: the checkpoint's tensors
are permuted before predicting the clean set (or ``items`` of it, drawn by the seed:
``sensitivity_items``), and a model that still scores well did not get its knowledge from
the checkpoint. A request with ``"weights": true`` also writes the checkpoint's float
tensors, as loaded, for the host's comparison of runs across seeds (``weights.py``).
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import time
from pathlib import Path

import numpy as np

from . import mllog
from .errors import HarnessError
from .frameworks import loader_for
from .model import load_model
from .provenance import Ledger
from .questions import answer, read_examples, write_answers
from .weights import dump

POLL_SECONDS = 0.005
BATCH = 500


def _drawn(n: int, key: str, size: int) -> list[int]:
    return list(_draw(n, key, size))  # a list: a tuple would index numpy arrays by dimension


@functools.lru_cache(maxsize=64)
def _draw(n: int, key: str, size: int) -> tuple[int, ...]:
    """Drawn once per process: the host's cross-seed checks ask for each run's probe items
    once per pair it is in (3 ms a draw of 2,000 of 10,000)."""
    if size >= n:
        return tuple(range(n))
    return tuple(sorted(random.Random(key).sample(range(n), size)))


def sensitivity_items(n: int, seed: int, size: int) -> list[int]:
    """The evaluation items a sensitivity request predicts: ``size`` of the ``n``, drawn by the
    runner's seed (the host scores them against the same labels). A permuted model either
    keeps its accuracy or falls to chance: a few thousand items tell the two apart."""
    return _drawn(n, f"sensitivity:{seed}", size)


def probe_items(n: int, seed: int, size: int) -> list[int]:
    """The perturbed items a probe request predicts: ``size`` of the ``n``, drawn by the seed the
    runner names in the request and records beside the predictions. A model that learned the
    task loses a point or less on them; answers recalled by the exact pixels lose tens of
    points: a few thousand items tell the two apart."""
    return _drawn(n, f"probe-items:{seed}", size)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="harness evaluate")
    p.add_argument("--entry-dir", type=Path, default=Path("/entry"))
    p.add_argument("--builder", required=True)
    p.add_argument("--framework", default="pytorch", help="the manifest's framework name (picks the loader)")
    p.add_argument("--requests", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--inputs", nargs="+", required=True, help="NAME=FOLDER holding images.npy")
    p.add_argument("--kind", choices=("images", "questions"), default="images",
                   help="the task's inputs: images.npy (class scores) or examples.jsonl (answers)")
    p.add_argument("--topk", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="where the model predicts (cuda: the run's GPUs, pytorch only)")
    return p.parse_args(argv)


def _input_sets(specs: list[str], kind: str = "images") -> dict[str, np.ndarray | list[dict]]:
    """Each named set: its images (``images.npy``), or for questions its examples."""
    sets: dict[str, np.ndarray | list[dict]] = {}
    for spec in specs:
        name, _, folder = spec.partition("=")
        if kind == "questions":
            sets[name] = read_examples(Path(folder))
            continue
        path = Path(folder) / "images.npy"
        if not path.is_file():
            raise HarnessError(f"no evaluation inputs at {path}; the evaluator needs image inputs")
        sets[name] = np.load(path, mmap_mode="r")
    return sets


def top_classes(scores: np.ndarray, topk: int) -> np.ndarray:
    """Per row, the best class (``topk`` 1) or the ``topk`` best, ranked best first."""
    if topk == 1:
        return scores.argmax(1)
    return np.argsort(-scores, axis=1, kind="stable")[:, :topk]


def predict(loaded, images: np.ndarray, topk: int) -> np.ndarray:
    rows = []
    for i in range(0, len(images), BATCH):
        scores = loaded.predict_batch(np.asarray(images[i:i + BATCH], dtype=np.float32))
        rows.append(top_classes(np.asarray(scores, dtype=np.float32), topk))
    return np.concatenate(rows).astype(np.int64)


def _wanted(sets: dict, request: dict, kind: str) -> dict:
    """The input sets a request predicts: every set, the probe cut to ``"probe_items"`` of its
    items drawn by ``"probe_seed"`` (images only)."""
    size, seed = request.get("probe_items"), request.get("probe_seed")
    if "probe" in sets and kind == "images" and isinstance(size, int) and size > 0 and isinstance(seed, int):
        sets = {**sets, "probe": sets["probe"][probe_items(len(sets["probe"]), seed, size)]}
    return sets


def _handle(args, sets: dict[str, np.ndarray | list[dict]], n: int, request: dict) -> None:
    started = time.monotonic()
    loaded = load_model(args.entry_dir, args.builder, Path(request["checkpoint"]), args.framework)
    shuffle_seed = request.get("shuffle_seed")
    extra: dict[str, object] = {}
    sets = _wanted(sets, request, getattr(args, "kind", "images"))
    if isinstance(shuffle_seed, int):
        extra["shuffled_tensors"] = loaded.shuffle_weights(shuffle_seed)
        clean = sets["clean"]
        size = request.get("items")
        if isinstance(size, int) and size > 0 and isinstance(clean, np.ndarray):  # images (questions are lists)
            clean = clean[sensitivity_items(len(clean), shuffle_seed, size)]
        sets = {"clean": clean}
    if getattr(args, "device", "cpu") != "cpu":
        loaded.to_device(args.device)  # after any shuffle: the permutation runs on the host's tensors
    mllog.emit("model_built", None, "POINT_IN_TIME", index=n, seconds=round(time.monotonic() - started, 6), **extra)
    folder = args.out / str(n)
    folder.mkdir(parents=True, exist_ok=True)
    if request.get("weights") is True:  # as loaded (a permutation changes the model's, not these)
        dump(loaded.checkpoint_tensors(), folder)
    ledger = None
    if shuffle_seed is None:
        ledger = Ledger(loaded.checkpoint_tensors(), loaded.normalise)
        loaded.record_uses(ledger)
    for name, inputs in sets.items():
        if isinstance(inputs, list):  # --kind questions: the examples (images are an array)
            write_answers(folder / f"{name}.json", answer(loaded, inputs))
        else:
            np.save(folder / f"{name}.npy", predict(loaded, inputs, args.topk))
    if ledger is not None:
        loaded.stop_recording()
        (folder / "provenance.json").write_text(json.dumps(ledger.record(), sort_keys=True))


def serve(args: argparse.Namespace) -> int:
    loader = loader_for(args.framework)
    loader.configure_threads(args.threads)
    sets = _input_sets(args.inputs, args.kind)
    # The framework's one-time costs (imports the first recorded pass would pay), paid here,
    # before the first request: the runner starts this process beside the entry's start-up,
    # at the lowest CPU weight, and freezes it once it is ready.
    warm_up = getattr(loader, "warm_up", None)
    if warm_up is not None:
        warm_up()
    mllog.emit("evaluator_ready")
    handled: set[int] = set()
    while True:
        # Requests are numbered by the runner, which skips a number when it refuses a
        # checkpoint before asking: take the lowest pending one, whatever it is.
        pending = sorted(int(p.stem) for p in args.requests.glob("*.json")
                         if p.stem.isdigit() and int(p.stem) not in handled)
        if pending:
            n = pending[0]
            handled.add(n)
            request = args.requests / f"{n}.json"
            try:
                _handle(args, sets, n, json.loads(request.read_text()))
                mllog.emit("evaluation_done", index=n)
            except HarnessError as exc:
                mllog.emit("evaluation_failed", index=n, message=str(exc))
            except Exception as exc:  # the entry's builder may raise anything
                mllog.emit("evaluation_failed", index=n, message=f"{type(exc).__name__}: {exc}")
        elif (args.requests / "stop").exists():
            return 0
        else:
            time.sleep(POLL_SECONDS)


