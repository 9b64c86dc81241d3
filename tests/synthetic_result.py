"""A realistic result folder without Docker: a fake MNIST run whose every derived number
(scores, TTA, curve, latency, gate, cost, hardware record) is computed by the project's
own functions, exactly as ``reproduce`` computes them, never typed by hand.

The run: the launcher's stamp, three runner evaluations of the entry's checkpoints (the
second is the first to meet 99.3% top-1, each with its probe predictions), the container's
exit, the final model's evaluation and both sensitivity checks; a torch inference backend
with batch-1 latencies; the real host fingerprint and the ``cpu-2core-x86`` profile.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from runner import __version__
from runner.inference.measure import evaluate_backend
from runner.profiles import cost_usd, hardware_record, load_profile, match, price_fields
from runner.digests import sha256_file
from runner.events import Event, runner_event, write_events
from runner.initial_weights import assign_roles, draw
from runner.run.init_weights import write_init
from runner.score.curve import write_curve
from runner.score.descent import descent_of_run
from runner.score.summary import final_record, model_origin
from runner.score.evaluations import score_evaluations
from runner.score.training_evidence import training_evidence
from runner.score.tta import time_to_accuracy, timeline
from runner.tasks import get_task

TASK = "mnist"
PROFILE = "cpu-2core-x86"
# Wrong answers per evaluation: 60% top-1, then 99.5% (first crossing), then 99.7%.
WRONG_PER_EVAL = (4000, 50, 30)
WRONG_INFERENCE = 20


# What an honest model's evaluator records: every tensor it used is one of its checkpoint's.
PROVENANCE = {"format": 1, "checkpoint_tensors": 26, "tensors_seen": 15, "matched": 15,
              "small_constants": {"count": 0, "bytes": 0},
              "budget": {"per_tensor_bytes": 4096, "total_bytes": 65536},
              "foreign_count": 0, "foreign_bytes": 0, "foreign": []}


def wrong_predictions(labels: np.ndarray, wrong: int, rng: np.random.Generator) -> np.ndarray:
    """The labels with ``wrong`` items changed to another class."""
    preds = labels.astype(np.int64).copy()
    idx = rng.choice(len(labels), size=wrong, replace=False)
    preds[idx] = (preds[idx] + 1 + rng.integers(0, 9, size=wrong)) % 10
    return preds


def _events(digests: list[str], pace: float = 1.0) -> list[Event]:
    """Host-stamped events: a 0.15 s launch, 4 s epochs (times ``pace``), frozen evaluations of 0.5 s."""
    out: list[tuple[float, str, dict, str]] = [(0.15, "launch", {"stamp": "launcher"}, "runner")]
    t = 1.5
    for i, digest in enumerate(digests):
        epoch = i + 1
        out.append((t + 0.01, "epoch_start", {"epoch_num": epoch}, "entry"))
        t += (4.0 + 0.25 * epoch) * pace
        ckpt = f"checkpoints/epoch_{epoch}.pt"
        out.append((t, "eval_request", {"epoch_num": epoch, "checkpoint": ckpt}, "entry"))
        out.append((t + 0.01, "eval_freeze", {"index": i, "epoch": epoch, "checkpoint": ckpt, "frozen": True,
                                              "state": "frozen", "cpu_seconds": 8.0 * epoch}, "runner"))
        t += 0.5
        out.append((t, "eval_thaw", {"index": i, "checkpoint_sha256": digest, "problem": None,
                                     "predictions": f"evaluations/{i}/clean.npy",
                                     "probe_predictions": f"evaluations/{i}/probe.npy",
                                     "builder_seconds": 0.02 + 0.001 * i, "predict_seconds": 0.4,
                                     "predict_cpu_seconds": 0.7,
                                     "provenance": f"evaluations/{i}/provenance.json"}, "runner"))
    out.append((t + 0.2, "container_exit", {"exit_code": 0}, "runner"))
    return [
        runner_event(i, round(when, 6), key, **meta) if origin == "runner"
        else Event(seq=i, t=round(when, 6), key=key, metadata=meta, event_type="POINT_IN_TIME")
        for i, (when, key, meta, origin) in enumerate(out)
    ]


def _write_json(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def make_result_folder(folder: Path, staged, fingerprint: dict, seed: int = 0, pace: float = 1.0) -> Path:
    """Write a complete, self-consistent result folder for ``staged`` (a StagedData); ``pace``
    stretches the epochs (runs of one entry that differ in their time to accuracy)."""
    task = get_task(TASK)
    profile = load_profile(PROFILE)
    labels = staged.load_eval_labels()
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    output = folder / "output"
    (output / "model").mkdir(parents=True)
    (output / "model" / "weights.pt").write_bytes(rng.bytes(4096))
    (folder / "checkpoints").mkdir()
    initial = write_initial_weights(folder, seed)
    moved = np.random.default_rng([seed, 44])  # apart from ``rng``: the predictions stay as they were
    models = [trained_from(initial, moved) for _ in WRONG_PER_EVAL] + [trained_from(initial, moved)]
    digests = []
    for i, wrong in enumerate(WRONG_PER_EVAL):
        (folder / "evaluations" / str(i)).mkdir(parents=True)
        np.save(folder / "evaluations" / str(i) / "clean.npy", wrong_predictions(labels, wrong, rng))
        np.save(folder / "evaluations" / str(i) / "probe.npy", wrong_predictions(labels, wrong + 30, rng))
        _write_json(folder / "evaluations" / str(i) / "provenance.json", PROVENANCE)
        checkpoint = folder / "checkpoints" / f"{i}.pt"
        checkpoint.write_bytes(rng.bytes(2048) + b"".join(v.tobytes() for v in models[i].values()))
        digests.append(sha256_file(checkpoint))

    events = _events(digests, pace)
    write_events(folder / "events.jsonl", events)
    line = timeline(events)
    scored = score_evaluations(task, line, folder, labels)
    tta = time_to_accuracy(line, [s.meets for s in scored])
    for path in (folder / "checkpoints").iterdir():  # only the crossing checkpoint is kept
        if path.name != f"{tta.crossing}.pt":
            path.unlink()
    write_curve(folder / "curve.tsv", task, line, scored)
    # The sensitivity check of the crossing checkpoint: permuted, the model answers at random.
    sensitivity_index = len(WRONG_PER_EVAL)
    (folder / "evaluations" / str(sensitivity_index)).mkdir(parents=True)
    np.save(folder / "evaluations" / str(sensitivity_index) / "clean.npy", rng.integers(0, 10, len(labels)))
    sensitivity = [{"of": "crossing", "evaluation": tta.crossing, "index": sensitivity_index, "shuffle_seed": 1,
                    "predictions": f"evaluations/{sensitivity_index}/clean.npy", "builder_seconds": 0.02,
                    "shuffled_tensors": 22}]
    # The final model, evaluated after training (the model the inference phase times), and
    # its own sensitivity check.
    timed = wrong_predictions(labels, WRONG_INFERENCE, rng)
    final_index, final_sensitivity = sensitivity_index + 1, sensitivity_index + 2
    (folder / "evaluations" / str(final_index)).mkdir(parents=True)
    np.save(folder / "evaluations" / str(final_index) / "clean.npy", timed)
    np.save(folder / "evaluations" / str(final_index) / "probe.npy", wrong_predictions(labels, WRONG_INFERENCE + 30, rng))
    _write_json(folder / "evaluations" / str(final_index) / "provenance.json", PROVENANCE)
    (folder / "evaluations" / str(final_sensitivity)).mkdir(parents=True)
    np.save(folder / "evaluations" / str(final_sensitivity) / "clean.npy", rng.integers(0, 10, len(labels)))
    final = final_record(task, {
        "index": final_index, "weights": "model/weights.pt", "sha256": sha256_file(output / "model" / "weights.pt"),
        "predictions": f"evaluations/{final_index}/clean.npy", "probe_predictions": f"evaluations/{final_index}/probe.npy",
        "builder_seconds": 0.02, "predict_seconds": 0.4, "provenance": f"evaluations/{final_index}/provenance.json",
    }, folder, labels)
    sensitivity.append({"of": "final", "evaluation": None, "index": final_sensitivity, "shuffle_seed": 1,
                        "predictions": f"evaluations/{final_sensitivity}/clean.npy", "builder_seconds": 0.02,
                        "shuffled_tensors": 22})
    for record in sensitivity:  # the evaluator's copies of the crossing's and the final model's tensors
        record["weights"] = write_dump(folder, record["index"], models[tta.crossing if record["of"] == "crossing" else -1])
    origin, origin_problems = model_origin(task, scored, tta.crossing, final, sensitivity, folder, labels, 30.0)
    assert not origin_problems, origin_problems
    origin["descent"], descent_problems = descent_of_run(folder, assign_roles(MODEL, "pytorch", ()), seed, "pytorch",
                                                         task.descent.similarity, sensitivity, tta.crossing)
    assert not descent_problems, descent_problems

    # Inference: one backend, batch-1 latencies around 0.2 ms, inside a host-stamped window.
    backend_dir = folder / "inference" / "torch"
    backend_dir.mkdir(parents=True)
    np.save(backend_dir / "predictions.npy", timed)
    latencies = rng.integers(150_000, 400_000, size=len(labels)).astype(np.int64)
    np.save(backend_dir / "latencies_ns.npy", latencies)
    _write_json(backend_dir / "info.json", {
        "backend": "torch", "version": "2.13.0+cpu", "threads": 1, "warmup": {"count": 200},
        "model_sha256": "0" * 64,
    })
    (folder / "inference" / "model.onnx").write_bytes(rng.bytes(2048))
    window = float(latencies.sum()) / 1e9 + 0.75
    write_events(folder / "inference" / "events.jsonl", [
        Event(0, 100.0, "infer_start", metadata={"backend": "torch"}),
        Event(1, round(100.0 + window, 6), "infer_stop", metadata={"backend": "torch"}),
    ])
    infer_record = evaluate_backend(
        "torch", backend_dir, task, labels, round(window, 6), profile.price.usd_per_hour
    )
    assert infer_record["passed_gate"], infer_record["gate_reason"]
    infer_record["final_model_disagreement"] = 0.0

    (folder / "logs").mkdir()
    (folder / "logs" / "train.log").write_text(
        "".join(f":::MLLOG {json.dumps({'key': e.key, 'metadata': e.metadata})}\n" for e in events)
    )
    (folder / "logs" / "infer.log").write_text("harness: torch 10000 items\n")
    _write_json(folder / "fingerprint.json", fingerprint)
    _write_json(folder / "sbom.json", {"python": [{"name": "torch", "version": "2.13.0+cpu"}], "debian": []})
    shutil.copyfile(profile.path, folder / "profile.yaml")

    mismatches = match(profile, fingerprint)
    result = {
        "schema_version": 1,
        "run_id": folder.name,
        "toolkit": {"name": "runner", "version": __version__, "harness_sha256": "1" * 64},
        "entry": {
            "name": "mnist-cnn-cpu", "model": "small-bn-cnn",
            "framework": {"name": "pytorch", "version": "2.13.0+cpu"}, "source": None, "claimed": {},
            "digests": {"manifest": "2" * 64, "dockerfile": "3" * 64, "lock": "4" * 64},
        },
        "task": {"id": task.id, "metric": task.metric, "threshold": task.threshold, "eval_size": task.eval_size},
        "seed": seed,
        "smoke": False,
        "status": "complete",
        "incomplete_reason": None,
        "conforming": not mismatches,
        "nonconforming_reasons": [f"hardware mismatch: {'; '.join(map(str, mismatches))}"] if mismatches else [],
        "probe": {"shift_pixels": [0, 1]},
        "image_audit": None,
        "slurm": None,
        "hyperparameters": {},
        "image": {"id": "sha256:" + "5" * 64, "tag": "runner/mnist-cnn-cpu:test", "base_id": "sha256:" + "6" * 64,
                  "base_tag": "runner-base/python3.11-bookworm"},
        "data": {"task": task.id, "digest": staged.digest, "source": staged.source},
        "training": {
            "wall_seconds": round(line.run_stop + 0.4, 6),
            "reached": tta.reached,
            "tta_seconds": tta.seconds,
            "tta_hours": tta.seconds / 3600,
            "tta_resolution_seconds": tta.resolution_seconds,
            "launch_seconds": line.clock_start,
            "wall_clock_start_unix_ms": 1795305723000,
            "train_samples": 60000,
            "launch_stamp": "launcher",
            "notes": [],
            "excluded_eval_seconds": tta.excluded_eval_seconds,
            "crossing": tta.crossing,
            "evaluations": [s.to_dict() for s in scored],
            "final_model": final,
            "model_origin": origin,
            "evidence": training_evidence(scored, tta.crossing, 60000, len(labels))[0],
            # A run of the format before the cross-seed record, judged by its own checks (a real
            # single run records why its cross-seed checks were not possible: tests/test_across_runs.py).
            "cross_seed": None,
        },
        "cost": {"training_usd": cost_usd(tta.seconds, profile), **price_fields(profile)},
        "inference": {"torch": infer_record},
        "hardware": hardware_record(profile, mismatches, False),
        "initial_weights": {"record": "init/init.json", "record_sha256": sha256_file(folder / "init" / "init.json"),
                            **initial_record(folder)},
    }
    _write_json(folder / "result.json", result)
    return folder


# The model the synthetic runs train: a few tensors in PyTorch's names (two judged alone at the
# default entry's limit, two normalisation tensors).
MODEL = [("conv.weight", (8, 1, 3, 3)), ("bn.weight", (8,)), ("bn.bias", (8,)), ("fc.weight", (10, 72))]


def trained_from(initial: dict[str, np.ndarray], rng: np.random.Generator, keep: float = 0.8) -> dict[str, np.ndarray]:
    """Weights that descend from ``initial``: ``keep`` of the start plus as much movement."""
    return {name: (keep * value + (1 - keep) * rng.normal(0, float(value.std()) or 0.1, value.shape)).astype(np.float32)
            for name, value in initial.items()}


def write_dump(folder: Path, index: int, tensors: dict[str, np.ndarray]) -> dict:
    """The evaluator's copy of a model's tensors (harness/weights.py's format) in ``evaluations/<index>/``."""
    target = folder / "evaluations" / str(index)
    (target / "weights").mkdir(parents=True, exist_ok=True)
    listed = []
    for k, (name, value) in enumerate(tensors.items()):
        np.save(target / "weights" / f"{k}.npy", value, allow_pickle=False)
        listed.append({"name": name, "shape": list(value.shape), "dtype": "float32"})
    _write_json(target / "weights.json", {"bytes": sum(v.nbytes for v in tensors.values()), "tensors": listed})
    return {"index": f"evaluations/{index}/weights.json", "tensors": len(listed)}


def write_initial_weights(folder: Path, seed: int) -> dict[str, np.ndarray]:
    """The runner's draw for the run (``init/``): its values."""
    tensors = assign_roles(MODEL, "pytorch", ())
    write_init(folder / "init", tensors, seed, "pytorch")
    return draw(tensors, seed, "pytorch")


def initial_record(folder: Path) -> dict:
    data = json.loads((folder / "init" / "init.json").read_text())
    return {"values_sha256": data["sha256"], "tensors": len(data["tensors"]), "drawn_elements": data["drawn_elements"],
            "undrawn": data["undrawn"]}


def edit_result(folder: Path, **changes) -> None:
    """Change fields of ``folder/result.json`` by path (``entry__claimed=...``), as a test's
    setting or a tamperer would (the folder must be signed again to verify)."""
    path = folder / "result.json"
    data = json.loads(path.read_text())
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        target = data
        for p in parents:
            target = target[p]
        target[leaf] = value
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def new_signer(folder: Path):
    """A fresh Ed25519 signer and its public key written to ``folder/trusted.pub.json`` (what a
    test passes to ``--trusted-keys``)."""
    from securesystemslib.signer import CryptoSigner

    from runner.keys import public_key_dict

    signer = CryptoSigner.generate_ed25519()
    keys = folder / "trusted.pub.json"
    keys.write_text(json.dumps(public_key_dict(signer.public_key)))
    return signer, keys


def honest_plan(folder: Path) -> dict:
    """The plan ``reproduce`` would have saved beside the result (``runner.plan.RunPlan.to_dict``'s form)."""
    r = json.loads((folder / "result.json").read_text())
    data = "/root/.cache/runner/data/mnist"
    return {"entry": "/work/entries/mnist-cnn-cpu", "entry_name": r["entry"]["name"], "task": r["task"]["id"],
            "profile": r["hardware"]["profile"], "options": {"smoke": False, "seed": None, "runs": None},
            "seeds": [r["seed"]], "placement": "local", "engine": "docker",
            "limits": {"cpus": 2.0, "memory": "8g", "gpus": 0, "threads": 2, "timeout_s": 1200},
            "backends": ["torch"], "image": r["image"]["id"],
            "data": {"train_dir": f"{data}/train", "eval_dir": f"{data}/eval", "digest": r["data"]["digest"],
                     "public": []},
            "network": None, "runner": [], "seed": r["seed"], "result_dir": str(folder), "probe_dir": None,
            "hyperparameters": {}}


def add_plan(folder: Path, plan: dict) -> None:
    """The result as the runner writes it now: plan.json beside it, its digest in result.json
    (the caller signs the folder again)."""
    text = json.dumps(plan, indent=2, sort_keys=True) + "\n"
    (folder / "plan.json").write_text(text)
    result = json.loads((folder / "result.json").read_text())
    result["plan"] = {"file": "plan.json", "sha256": hashlib.sha256(text.encode()).hexdigest()}
    _write_json(folder / "result.json", result)


def stage_mnist_stand_in(home: Path, seed: int = 7):
    """Random MNIST-shaped data with the real evaluation size, staged under ``home``."""
    from runner.data import synthetic

    return synthetic(TASK, home / "data" / TASK, n_train=8, n_eval=get_task(TASK).eval_size, seed=seed)


@contextmanager
def auditor_home(tmp_path_factory) -> Iterator:
    """A fresh runner home holding the MNIST stand-in (the auditor's staged data), set as
    ``RUNNER_HOME`` while the block runs; yields the staged set."""
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RUNNER_HOME", str(home))
        yield stage_mnist_stand_in(home)


def reinference_work(folder: Path, backend: str = "onnxruntime") -> Path:
    """What ``runner reinfer`` leaves in its work folder (inside the result) once ``backend``
    was timed: its inference files, events and log, for ``runner.reinference.swap_in``."""
    work = folder / ".infer-test"
    (work / "inference" / backend).mkdir(parents=True)
    (work / "inference" / backend / "info.json").write_text("{}")
    write_events(work / "inference" / "events.jsonl", [
        Event(0, 1.0, "infer_start", metadata={"backend": backend}),
        Event(1, 2.0, "infer_stop", metadata={"backend": backend})])
    (work / "logs").mkdir()
    (work / "logs" / "infer.log").write_text(f"harness: {backend}\n")
    return work
