from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from runner.cli import main
from runner.errors import UserError
from runner.manifest import load_entry

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def entry_copy(tmp_path):
    dst = tmp_path / "mnist-cnn-cpu"
    shutil.copytree(REPO / "entries" / "mnist-cnn-cpu", dst)
    return dst


def edit(folder: Path, change) -> None:
    data = yaml.safe_load((folder / "entry.yaml").read_text())
    change(data)
    (folder / "entry.yaml").write_text(yaml.safe_dump(data))


def test_every_shipped_entry_is_valid():
    for folder in sorted((REPO / "entries").iterdir()):
        entry = load_entry(folder)
        assert entry.name == folder.name
        assert set(entry.digests()) == {"manifest", "dockerfile", "lock"}


@pytest.mark.parametrize(
    "change, field, fix",
    [
        (lambda d: d.pop("task"), "(top level)", "add 'task'"),
        (lambda d: d.update(task="mnist2"), "task", "one of"),
        (lambda d: d.update(runs="two"), "runs", "integer"),
        (lambda d: d["train"].update(command=[]), "train.command", "correct train.command"),
        (lambda d: d.update(schema_version=2), "schema_version", "set schema_version to 1"),
        (lambda d: d.update(colour="red"), "(top level)", "remove or rename"),
        (lambda d: d["inference"].update(backends=["tensorflow-lite"]), "inference.backends.0",
         "one of"),
        (lambda d: d["inference"].update(builder="model.build_model"), "inference.builder",
         "correct"),
    ],
)
def test_bad_manifest_names_the_field_and_the_fix(entry_copy, change, field, fix):
    edit(entry_copy, change)
    with pytest.raises(UserError) as err:
        load_entry(entry_copy)
    assert f"field '{field}'" in err.value.problem
    assert fix in err.value.fix


def test_a_framework_without_a_loader_is_refused_at_validation(entry_copy, capsys):
    """The schema's frameworks are the registry's (runner/frameworks/), each with a loader: a
    JAX entry (no loader) is refused before any build, in one line naming those that exist."""
    from runner.frameworks import FRAMEWORKS

    edit(entry_copy, lambda d: d.update(framework={"name": "jax", "version": "0.4.30"}))
    with pytest.raises(UserError) as err:
        load_entry(entry_copy)
    assert "field 'framework.name' is invalid: 'jax' is not one of" in err.value.problem
    assert err.value.fix == "set framework.name to one of: pytorch, tensorflow, mxnet"
    assert list(FRAMEWORKS) == ["pytorch", "tensorflow", "mxnet"]
    assert main(["schema", "--check", str(entry_copy)]) == 2
    said = capsys.readouterr().err.strip()
    assert said.startswith("runner: error:") and "\n" not in said and "pytorch, tensorflow, mxnet" in said


def test_name_must_match_folder(entry_copy):
    edit(entry_copy, lambda d: d.update(name="other"))
    with pytest.raises(UserError, match="folder is 'mnist-cnn-cpu'"):
        load_entry(entry_copy)


def test_yaml_syntax_error_is_one_line(entry_copy, capsys):
    (entry_copy / "entry.yaml").write_text("name: [unclosed\n")
    assert main(["schema", "--check", str(entry_copy)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("runner: error:") and "not valid YAML at line" in err
    assert "\n" not in err and "Traceback" not in err


def test_missing_entry_folder(tmp_path, capsys):
    assert main(["schema", "--check", str(tmp_path / "nope")]) == 2
    assert "no entry folder" in capsys.readouterr().err


def test_schema_command_prints_json_schema(capsys):
    import json

    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["properties"]["schema_version"] == {"const": 1, "description": "manifest schema version"}
    assert "task" in schema["required"]


def test_schema_command_prints_the_result_schema(capsys):
    import json

    assert main(["schema", "--result"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["properties"]["schema_version"] == {"const": 1}
    assert "training" in schema["required"]
