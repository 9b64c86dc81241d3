"""``python3 -m harness``: rebuild the model, export ONNX, time each backend.

Writes to ``--out``: ``model.onnx`` and ``export.json`` (when a backend needs ONNX), and
per backend ``<backend>/predictions.npy``, ``latencies_ns.npy`` and ``info.json``; with
``--loadgen``, also LoadGen's logs under ``<backend>/loadgen/<scenario>/`` (see loadgen.py).

Exit codes: 0 every backend ran; 2 nothing was done (a backend cannot run here, bad
arguments, missing model or data); 1 some backend failed mid-way (its ``info.json``
says why; the other backends' files are complete).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path

import numpy as np

from . import loadgen, mllog
from .backends import QUESTION_BACKENDS, ModelFiles, backend_class
from .errors import HarnessError
from .export import export_onnx
from .frameworks import loader_for
from .loadgen import PROFILES, run_loadgen
from .model import load_model
from .questions import read_examples, timed_pass as timed_questions, write_answers
from .timing import CLOCK, timed_pass


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="harness", description="Batch-1 inference timing, one item at a time.")
    p.add_argument("--entry-dir", type=Path, default=Path("/entry"))
    p.add_argument("--builder", required=True, help="module:function returning the untrained model")
    p.add_argument("--weights", type=Path, required=True, help="the trained model, in its framework's own format")
    p.add_argument("--framework", default="pytorch", help="the manifest's framework name (picks the loader)")
    p.add_argument("--eval-dir", type=Path, default=Path("/data/eval"))
    p.add_argument("--out", type=Path, default=Path("/inference"))
    p.add_argument("--backends", nargs="+", required=True)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--opset", type=int, default=17)
    p.add_argument("--fp16", action="store_true")
    p.add_argument("--topk", type=int, default=1, help="ranked classes per item (5 for top-5 tasks)")
    p.add_argument("--kind", choices=("images", "questions"), default="images",
                   help="the task's inputs: images.npy, or examples.jsonl answered one question at a time")
    p.add_argument("--limit", type=int, default=None, help="time only the first N items (benchmarks)")
    p.add_argument("--loadgen", action="store_true",
                   help="after the per-item pass, run MLPerf LoadGen SingleStream and Offline")
    p.add_argument("--loadgen-settings", choices=("dawnbench", "mlperf"), default="dawnbench",
                   help="LoadGen's minimums: a few seconds beside the per-item figure (dawnbench), "
                        "or MLPerf Inference's 600 s per scenario (mlperf)")
    return p.parse_args(argv)


def _write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def _load_images(eval_dir: Path, limit: int | None) -> np.ndarray:
    path = eval_dir / "images.npy"
    if not path.is_file():
        raise HarnessError(f"no evaluation inputs at {path}; batch-1 timing needs image inputs")
    images = np.load(path, mmap_mode="r")
    if images.ndim != 4:
        raise HarnessError(f"{path} has shape {images.shape}; expected N x C x H x W")
    return images[:limit] if limit else images


def _loadgen_pass(backend, images: np.ndarray, work_dir: Path, latencies_ns: np.ndarray,
                  profile: str = "dawnbench") -> dict:
    """LoadGen's scenarios for one backend; a failure here keeps the per-item figures."""
    try:
        return run_loadgen(backend.predict, images, work_dir / "loadgen", backend=backend.name,
                           expected_latency_s=float(np.mean(latencies_ns)) / 1e9,
                           settings=PROFILES[profile])
    except Exception as exc:
        message = f"{type(exc).__name__}: {exc}"
        print(f"harness: loadgen failed for {backend.name}: {message}", file=sys.stderr, flush=True)
        return {"error": message}


def run(args: argparse.Namespace) -> int:
    # Before any work: every requested backend must be able to run here.
    classes = [backend_class(name) for name in args.backends]
    for cls in classes:
        cls.check_available()
    if args.warmup < 0 or args.threads < 1 or args.topk < 1:
        raise HarnessError("--warmup must be >= 0, --threads >= 1, --topk >= 1")
    if args.loadgen:
        loadgen.check_available()

    loader_for(args.framework).configure_threads(args.threads)  # before the framework does any work

    if args.kind == "questions":
        return run_questions(args, classes)
    images = _load_images(args.eval_dir, args.limit)
    loaded = load_model(args.entry_dir, args.builder, args.weights, args.framework)
    input_shape = (1, *images.shape[1:])
    args.out.mkdir(parents=True, exist_ok=True)

    onnx_path = onnx_info = None
    if any(cls.needs_onnx for cls in classes):
        onnx_path = args.out / "model.onnx"
        onnx_info = export_onnx(loaded, input_shape, onnx_path, args.opset)
        _write_json(args.out / "export.json", onnx_info)
        mllog.emit("onnx_export", value=onnx_info["sha256"], opset=args.opset)

    failed = []
    for cls in classes:
        work_dir = args.out / cls.name
        work_dir.mkdir(parents=True, exist_ok=True)
        files = ModelFiles(
            model=loaded, weights=loaded.weights, weights_sha256=loaded.weights_sha256,
            onnx=onnx_path, onnx_info=onnx_info, input_shape=input_shape, topk=args.topk,
            threads=args.threads, fp16=args.fp16, work_dir=work_dir,
        )
        try:
            backend = cls()
            backend.prepare(files)
            result = timed_pass(backend.predict, images, warmup=args.warmup, topk=args.topk, backend=cls.name)
            np.save(work_dir / "predictions.npy", result.predictions)
            np.save(work_dir / "latencies_ns.npy", result.latencies_ns)
            info = backend.info()
            info.update(
                backend=cls.name,
                count=int(len(result.latencies_ns)),
                topk=args.topk,
                warmup={"count": result.warmup_count, "seconds": round(result.warmup_seconds, 6)},
                clock=CLOCK,
                timed_ns=int(result.latencies_ns.sum()),
                window_ns=result.window_ns,
                weights_sha256=loaded.weights_sha256,
                environment={k: os.environ[k] for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS") if k in os.environ},
            )
            if args.loadgen:
                info["loadgen"] = _loadgen_pass(backend, images, work_dir, result.latencies_ns,
                                                args.loadgen_settings)
            _write_json(work_dir / "info.json", info)
        except Exception as exc:  # one backend's failure must not cost the others' results
            _backend_failed(cls.name, work_dir, exc, ("predictions.npy", "latencies_ns.npy"))
            failed.append(cls.name)
    return 1 if failed else 0


def _backend_failed(name: str, work_dir: Path, exc: Exception, partials: tuple[str, ...]) -> None:
    """Say why a backend failed (its info.json, an event, stderr) and drop its partial files."""
    message = str(exc) if isinstance(exc, HarnessError) else f"{type(exc).__name__}: {exc}"
    print(f"harness: error: backend {name}: {message}", file=sys.stderr, flush=True)
    if not isinstance(exc, HarnessError):
        traceback.print_exc(file=sys.stderr)
    for partial in partials:
        (work_dir / partial).unlink(missing_ok=True)
    _write_json(work_dir / "info.json", {"backend": name, "error": message})
    mllog.emit("infer_error", value=message, backend=name)


# Question answering is timed by the backends whose row says so (``BackendSpec.questions``);
# LoadGen's harness feeds arrays, not texts.


def run_questions(args: argparse.Namespace, classes) -> int:
    """Batch-1 answers for a question task: every question, one at a time (questions.py)."""
    for cls in classes:
        if cls.name not in QUESTION_BACKENDS:
            raise HarnessError(f"the {cls.name} backend cannot time question answering; "
                               f"use {', '.join(QUESTION_BACKENDS)} in inference.backends")
    examples = read_examples(args.eval_dir)
    examples = examples[:args.limit] if args.limit else examples
    loaded = load_model(args.entry_dir, args.builder, args.weights, args.framework)
    args.out.mkdir(parents=True, exist_ok=True)
    failed = []
    for cls in classes:
        work_dir = args.out / cls.name
        work_dir.mkdir(parents=True, exist_ok=True)
        try:
            import torch  # lazy: optional (torch: only in images with PyTorch)

            torch.set_num_threads(args.threads)
            with torch.inference_mode():
                answers, latencies, warmup_seconds, window_ns = timed_questions(
                    loaded, examples, warmup=args.warmup, backend=cls.name)
            write_answers(work_dir / "predictions.json", answers)
            np.save(work_dir / "latencies_ns.npy", latencies)
            info = {
                "backend": cls.name, "version": torch.__version__,
                "settings": {"mode": "eager", "device": "cpu", "grad": "torch.inference_mode",
                             "item": "one question: encode, forward pass, span decoding"},
                "threads": {"intra_op": torch.get_num_threads(), "inter_op": torch.get_num_interop_threads()},
                "model_file": str(loaded.weights), "model_sha256": loaded.weights_sha256,
                "framework": loaded.framework, "framework_version": loaded.version, "layout": "text",
                "count": int(len(latencies)), "topk": None,
                "warmup": {"count": args.warmup, "seconds": round(warmup_seconds, 6)},
                "clock": CLOCK, "timed_ns": int(latencies.sum()), "window_ns": window_ns,
                "weights_sha256": loaded.weights_sha256,
                "environment": {k: os.environ[k] for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS") if k in os.environ},
            }
            if args.loadgen:
                info["loadgen"] = {"error": "not run: LoadGen is not wired for question answering"}
            _write_json(work_dir / "info.json", info)
        except Exception as exc:  # as above
            _backend_failed(cls.name, work_dir, exc, ("predictions.json", "latencies_ns.npy"))
            failed.append(cls.name)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv[:1] == ["evaluate"]:  # the runner's evaluator, during training
            from .evaluate import parse_args as evaluate_args, serve  # lazy: start-up (python -m harness: each subcommand loads its own)

            return serve(evaluate_args(argv[1:]))
        if argv[:1] == ["flops"]:  # the roofline study's count, in the entry's image
            from .flops import main as flops  # lazy: start-up (python -m harness: each subcommand loads its own)

            return flops(argv[1:])
        if argv[:1] == ["init-shapes"]:  # the runner's draw of the initial weights, in the entry's image
            from .init_shapes import main as init_shapes  # lazy: start-up (python -m harness: each subcommand loads its own)

            return init_shapes(argv[1:])
        if argv[:1] == ["features"]:  # the generalization study's transfer, in the entry's image
            from .features import main as features  # lazy: start-up (python -m harness: each subcommand loads its own)

            return features(argv[1:])
        return run(parse_args(argv))
    except HarnessError as err:
        print(f"harness: error: {err}", file=sys.stderr, flush=True)
        return err.exit_code
