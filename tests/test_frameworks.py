"""The framework axis: the Fashion-MNIST twins (PyTorch, TensorFlow, MXNet) each build in the
real engine and run a smoke reproduce whose checkpoints the runner's evaluator loads with
that framework's loader and whose final model both of its backends time; the loaders' and
exporters' error paths that need no framework but PyTorch; and the registry
(``runner/frameworks/``): every per-framework table derives from it, a framework is one
folder (and its loader), and a folder without a loader is refused."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import yaml

from runner.entry_build import framework_versions
from runner.cli import main
from runner.errors import UserError
from runner.harness.backends import REGISTRY, backend_class, backends_for
from runner.harness.errors import HarnessError
from runner.frameworks import FRAMEWORKS
from runner.harness.frameworks import loader_for, loaders
from runner.harness.frameworks.operators import unsupported_operator
from runner.manifest import load_entry
from runner.results.layout import entry_runs
from runner.score.model_origin import sensitivity_problem

REPO = Path(__file__).resolve().parents[1]

# twin -> (manifest framework, its native backend, the checkpoint's file suffix)
TWINS = {
    "fashion-mnist-torch-cpu": ("pytorch", "torch", ".pt"),
    "fashion-mnist-tf-cpu": ("tensorflow", "tensorflow", ".keras"),
    "fashion-mnist-mxnet-cpu": ("mxnet", "mxnet", ".params"),
}


def test_the_sbom_names_each_framework_under_any_of_its_wheel_names():
    sbom = {"python": [{"name": "tensorflow_cpu", "version": "2.21.0"}, {"name": "mxnet", "version": "1.9.1"},
                       {"name": "torch", "version": "2.13.0+cpu"}, {"name": "numpy", "version": "1.23.5"}]}
    assert framework_versions(sbom) == {"torch": "2.13.0+cpu", "tensorflow": "2.21.0", "mxnet": "1.9.1"}
    assert framework_versions({"python": [{"name": "numpy", "version": "2.4.6"}]}) == {}


# -- loaders and exporters (no Docker) ------------------------------------------------------
def test_every_manifest_framework_with_a_twin_has_a_loader_and_a_native_backend():
    for framework, native, _ in TWINS.values():
        assert framework in FRAMEWORKS and framework in loaders()
        assert REGISTRY[native].framework == framework
        assert backends_for(framework)[:1] == (native,) or native in backends_for(framework)
        assert "onnxruntime" in backends_for(framework)  # ONNX backends run any framework's export


def test_an_unknown_framework_is_a_clear_error():
    with pytest.raises(HarnessError, match="no loader for framework 'jax'; the harness knows mxnet, pytorch, tensorflow$"):
        loader_for("jax")
    with pytest.raises(HarnessError, match="no loader for framework 'operators'"):  # a helper module, not a loader
        loader_for("operators")


def test_a_native_backend_of_another_framework_is_refused_at_load(tmp_path):
    folder = tmp_path / "fashion-mnist-tf-cpu"
    folder.mkdir()
    for name in ("Dockerfile", "requirements.lock"):
        (folder / name).write_text((REPO / "entries" / "fashion-mnist-tf-cpu" / name).read_text())
    manifest = yaml.safe_load((REPO / "entries" / "fashion-mnist-tf-cpu" / "entry.yaml").read_text())
    manifest["inference"]["backends"] = ["torch", "onnxruntime"]
    (folder / "entry.yaml").write_text(yaml.safe_dump(manifest))
    with pytest.raises(UserError, match="backend 'torch' cannot run a tensorflow model") as err:
        load_entry(folder)
    assert "tensorflow, onnxruntime" in err.value.fix


@pytest.mark.parametrize("message, operator", [
    ("Exporting the operator 'aten::special_bessel_j0' to ONNX opset version 17 is not supported.",
     "aten::special_bessel_j0"),
    ("Unsupported ops: Counter({'RaggedTensorToTensor': 1})", "RaggedTensorToTensor"),
    ("No conversion function registered for op type _contrib_foo yet.", "_contrib_foo"),
    ("something else went wrong", None),
])
def test_each_exporters_wording_yields_the_operator(message, operator):
    assert unsupported_operator(message) == operator


def test_a_torch_export_failure_names_the_operator(tmp_path):
    import torch

    (tmp_path / "odd.py").write_text(
        "import torch\n"
        "class Odd(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return torch.special.bessel_j0(x).flatten(1)[:, :10]\n"
        "def build():\n"
        "    return Odd()\n"
    )
    torch.save({}, tmp_path / "w.pt")
    loaded = loader_for("pytorch").load(tmp_path, "odd:build", tmp_path / "w.pt")
    scores = loaded.predict_batch(np.zeros((3, 1, 28, 28), np.float32))
    assert scores.shape == (3, 10) and scores.dtype == np.float32
    from runner.harness.export import export_onnx

    with pytest.raises(HarnessError, match=r"PyTorch ONNX export at opset 17 failed: operator aten::special_bessel_j0 is not supported"):
        export_onnx(loaded, (1, 1, 28, 28), tmp_path / "m.onnx", 17)


def test_an_operator_left_unconverted_by_the_exporter_is_named(tmp_path):
    """tf2onnx only logs an op it cannot convert and leaves it in the graph: the harness
    refuses such a file, naming the op."""
    import onnx
    from onnx import TensorProto, helper

    from runner.harness.export import export_onnx
    from runner.harness.frameworks import LoadedModel

    class LeavesAnOp(LoadedModel):
        def export_onnx(self, input_shape, path, opset):
            node = helper.make_node("RaggedTensorToTensor", ["input"], ["scores"])
            graph = helper.make_graph(
                [node], "g", [helper.make_tensor_value_info("input", TensorProto.FLOAT, list(input_shape))],
                [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 10])],
            )
            onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), str(path))
            return {}

    loaded = LeavesAnOp("tensorflow", "2.21.0", None, tmp_path / "m.keras", "0" * 64, "NHWC")
    with pytest.raises(HarnessError, match="tensorflow ONNX export at opset 17 failed: operator RaggedTensorToTensor is not supported"):
        export_onnx(loaded, (1, 1, 28, 28), tmp_path / "m.onnx", 17)


def test_the_evaluator_ranks_scores_without_a_framework():
    from runner.harness.evaluate import top_classes

    scores = np.array([[0.1, 0.7, 0.2], [0.5, 0.1, 0.4]], np.float32)
    assert top_classes(scores, 1).tolist() == [1, 0]
    assert top_classes(scores, 2).tolist() == [[1, 2], [0, 2]]


# -- the registry (runner/frameworks/) -------------------------------------------------------
@pytest.mark.parametrize("name", list(FRAMEWORKS))
def test_each_framework_declares_its_whole_interface(name):
    """Its loader (the container's half) reads its models, its native backend runs them, its
    probe reports it, and it has a FLOP counter exactly when its declaration names one."""
    framework = FRAMEWORKS[name]
    loader = loader_for(name)
    assert framework.loader == loader.__name__
    assert callable(loader.load) and callable(loader.configure_threads)
    assert framework.native_backends and all(not backend_class(b).needs_onnx for b in framework.native_backends)
    assert f'out["{framework.module}"]' in framework.probe and framework.distributions
    assert (framework.flop_counter is not None) == hasattr(loader, "count_flops")
    assert framework.label and framework.rows[0][1] == ("version",)


def test_every_framework_table_is_derived_from_the_registry():
    from runner.entry_build.sbom import FRAMEWORK_DISTRIBUTIONS
    from runner.fingerprint.image_software import PROBE
    from runner.harness.backends import QUESTION_BACKENDS
    from runner.manifest.schema import ENTRY_SCHEMA
    from runner.run.evaluator import evaluator_device_args

    assert ENTRY_SCHEMA["properties"]["framework"]["properties"]["name"]["enum"] == list(FRAMEWORKS)
    assert list(FRAMEWORK_DISTRIBUTIONS) == [f.module for f in FRAMEWORKS.values()]
    assert all(f.probe in PROBE for f in FRAMEWORKS.values())
    assert set(loaders()) == set(FRAMEWORKS)  # the harness reads exactly the declared frameworks
    assert {spec.framework for spec in REGISTRY.values()} - {None} == set(FRAMEWORKS)
    assert QUESTION_BACKENDS == ("torch",)  # the backend table's own column
    for name, framework in FRAMEWORKS.items():
        assert evaluator_device_args(name, 1) == (["--device", framework.gpu_device] if framework.gpu_device else [])
        assert evaluator_device_args(name, 0) == []


def test_a_backend_row_naming_an_undeclared_framework_is_refused(monkeypatch):
    import runner.frameworks as registry
    from runner.harness.backends import BackendSpec

    monkeypatch.setattr(registry, "BACKENDS", {**REGISTRY, "jax": BackendSpec("jax_backend", "JaxBackend", False,
                                                                               ("jax",), "jax")})
    with pytest.raises(ImportError, match="the backend table names frameworks not declared under runner/frameworks: jax"):
        registry.discover(registry.__path__, f"{registry.__name__}.")


def test_the_flop_counter_is_the_frameworks_own(tmp_path):
    """PyTorch's loader counts (here on the host, as the roofline study's container does); a
    framework without a counter is refused by the harness and, before any container, by the host."""
    from runner.harness import flops
    from runner.study.flops import count_in_container, parse_count

    args = ["--entry-dir", str(REPO / "entries" / "mnist-cnn-cpu"), "--builder", "model:build_model",
            "--input-shape", "1,28,28", "--num-classes", "10", "--batch", "8", "--out", str(tmp_path)]
    assert flops.main(args) == 0
    counted = parse_count((tmp_path / flops.RESULT_FILE).read_text(), 8)
    assert counted["train_step"]["flops"] > counted["inference_item"]["flops"] > 0 and counted["torch"]
    with pytest.raises(HarnessError, match="for pytorch models; this entry's framework is 'tensorflow'"):
        flops.main([*args, "--framework", "tensorflow"])
    with pytest.raises(UserError) as err:
        count_in_container(None, None, builder="model:build_model", framework="mxnet", input_shape=(1, 28, 28),
                           num_classes=10, batch=8)
    assert err.value.problem == ("the roofline study counts FLOPs with torch.utils.flop_counter; this entry's "
                                 "framework is mxnet")
    assert err.value.fix == "run it on a PyTorch entry"


TOY_FRAMEWORK = '''\
"""ToyFW: what one new framework folder holds."""

from runner.frameworks.base import Framework

FRAMEWORK = Framework(
    name="toyfw", listed=9, label="ToyFW", module="toyfw", distributions=("toyfw", "toyfw-gpu"),
    probe=''\'\ntoyfw = load("toyfw")\nout["toyfw"] = None if toyfw is None else {"version": toyfw.__version__}\n''\',
)
'''
TOY_LOADER = '''\
"""ToyFW's loader: the container's half."""


def configure_threads(threads):
    pass


def load(entry_dir, builder, weights):
    raise NotImplementedError
'''
TOY_CHECK = '''\
import io, json

from rich.console import Console

import runner
from runner.entry_build.sbom import framework_versions
from runner.fingerprint.image_software import PROBE
from runner.fingerprint.table import render
from runner.harness.frameworks import loaders
from runner.manifest.schema import ENTRY_SCHEMA
from runner.mlperf.system import system_description
from runner.run.evaluator import evaluator_device_args

image = {"ref": "r", "id": "i", "python": "3.11", "toyfw": {"version": "1.0"}}
fingerprint = {"host": {"hostname": "h"}, "cpu": {}, "memory": {}, "os": {}, "gpu": {}, "image": image}
console = Console(file=io.StringIO(), width=200, record=True)
console.print(render(fingerprint))
print(json.dumps({
    "package": runner.__file__,
    "schema": ENTRY_SCHEMA["properties"]["framework"]["properties"]["name"]["enum"],
    "sbom": framework_versions({"python": [{"name": "toyfw_gpu", "version": "1.0"}]}),
    "probe": 'out["toyfw"]' in PROBE,
    "mlperf": system_description(fingerprint)["framework"],
    "fingerprint": "toyfw" in console.export_text(),
    "harness": list(loaders()),
    "device": evaluator_device_args("toyfw", 1),
}))
'''


def test_a_new_framework_is_one_folder_and_its_loader(tmp_path):
    """A copy of the package with one more folder under runner/frameworks: refused while the
    harness has no loader for it; with one, every derived table holds it."""
    copy = tmp_path / "tree"
    shutil.copytree(REPO / "runner", copy / "runner", ignore=shutil.ignore_patterns("__pycache__"))
    toy = copy / "runner" / "frameworks" / "toyfw"
    toy.mkdir()
    (toy / "__init__.py").write_text(TOY_FRAMEWORK)
    (tmp_path / "check.py").write_text(textwrap.dedent(TOY_CHECK))

    def check():
        return subprocess.run([sys.executable, str(tmp_path / "check.py")], cwd=tmp_path, capture_output=True,
                              text=True, env={"PYTHONPATH": str(copy), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})

    refused = check()
    assert refused.returncode != 0
    assert "ImportError: framework 'toyfw' has no loader: add runner/harness/frameworks/toyfw.py" in refused.stderr
    (copy / "runner" / "harness" / "frameworks" / "toyfw.py").write_text(TOY_LOADER)
    done = check()
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"package": str(copy / "runner" / "__init__.py"),
                      "schema": ["pytorch", "tensorflow", "mxnet", "toyfw"], "sbom": {"toyfw": "1.0"}, "probe": True,
                      "mlperf": "ToyFW 1.0", "fingerprint": True, "harness": ["mxnet", "pytorch", "tensorflow", "toyfw"],
                      "device": []}


# -- the twins in the real engine -----------------------------------------------------------
@pytest.fixture
def results(tmp_path, monkeypatch):
    folder = tmp_path / "results"
    monkeypatch.setenv("RUNNER_RESULTS", str(folder))
    return folder


@pytest.mark.docker
@pytest.mark.parametrize("twin", list(TWINS))
def test_each_twin_builds_and_its_smoke_run_is_evaluated_and_timed_in_its_framework(docker_client, results, twin):
    framework, native, suffix = TWINS[twin]
    entry = load_entry(REPO / "entries" / twin)
    assert entry.framework["name"] == framework
    assert main(["reproduce", str(entry.path), "--smoke"]) == 0
    (folder,) = entry_runs(results, twin)
    result = json.loads((folder / "result.json").read_text())
    assert result["status"] == "complete" and result["smoke"] and not result["conforming"]

    # The runner's evaluator loaded the entry's own checkpoint format and predicted every item.
    (evaluation,) = result["training"]["evaluations"]
    assert evaluation["count"] == 512 and len(evaluation["checkpoint_sha256"]) == 64
    assert evaluation["checkpoint"].endswith(suffix) and evaluation["problem"] is None
    final = result["training"]["final_model"]
    assert final["weights"].endswith(suffix) and final.get("problem") is None and final.get("predictions")

    # Class 4 checks in each framework: every tensor the model used is its checkpoint's, and
    # with the checkpoint permuted the trained model falls to chance. No finding on a twin.
    origin = result["training"]["model_origin"]
    assert not [r for r in result["nonconforming_reasons"] if r.startswith("class 4")]
    for record in origin["provenance"].values():
        assert record["problem"] is None and record["foreign_count"] == 0, record
    provenance = json.loads((folder / origin["provenance"]["final"]["record"]).read_text())
    assert provenance["matched"] >= 10 and provenance["checkpoint_tensors"] >= 10
    (sensitivity,) = [s for s in origin["sensitivity"] if s["of"] == "final"]
    assert sensitivity["problem"] is None and sensitivity["shuffled_tensors"] >= 10
    # Judged as the product judges it, on the items predicted: the permuted score is under the
    # bound, or the model never left chance (a smoke run's few steps; its permuted twin may
    # land a few points above the bare limit by the luck of 512 items, as one CI run saw:
    # 0.156 against 0.113, the model itself at 0.127), which leaves nothing to explain.
    assert 0.0 <= sensitivity["score"] <= 1.0 and sensitivity["items_scored"] == 512
    assert sensitivity["bound"] > sensitivity["limit"] >= sensitivity["chance"] > 0
    assert sensitivity_problem(entry.task, sensitivity) is None
    assert 0 <= origin["builder_seconds"]["max"] < origin["builder_seconds"]["limit"]

    # Both backends ran on the final model and say which framework and version it came from.
    assert set(result["inference"]) == {native, "onnxruntime"}
    for backend in (native, "onnxruntime"):
        info = json.loads((folder / "inference" / backend / "info.json").read_text())
        assert "error" not in info, info.get("error")
        assert info["framework"] == framework and info["framework_version"]
        assert info["layout"] and len(info["model_sha256"]) == 64 and info["threads"]
        assert "gate_reason" in result["inference"][backend] or "passed_gate" in result["inference"][backend]
    export = json.loads((folder / "inference" / "export.json").read_text())
    assert export["framework"] == framework and export["opset_in_file"] >= 13

    # The image's SBOM names the framework and its version, whatever its wheel is called.
    sbom = json.loads((folder / "sbom.json").read_text())
    assert framework_versions(sbom)[FRAMEWORKS[framework].module] == entry.framework["version"]
