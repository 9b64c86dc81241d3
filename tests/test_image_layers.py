"""The image inspection layer by layer (issue 50): each layer read once and its facts kept by
its diff id; a second image on the same lower layers parses only its own, a kept record
cannot hide a finding, and whiteouts are judged as the merged view."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from runner import paths
from runner.entry_build import layers
from runner.entry_build.context import entry_files
from runner.entry_build.image_inspection import inspect_image

pytestmark = pytest.mark.docker

# The shared lower layers: a stand-in for the framework venv, a file the audit flags, and a
# folder an upper layer replaces whole.
FRAMEWORK = """FROM {base}
RUN mkdir -p /opt/fw /opt/data && printf 'def f():\\n    return 1\\n' > /opt/fw/lib.py \\
    && head -c 4096 /dev/urandom > /opt/fw/weights.pt && head -c 2048 /dev/urandom > /opt/data/old.pt
RUN printf 'x = 2\\n' > /opt/fw/more.py
"""
# An honest entry on it...
HONEST = """FROM {framework}
RUN mkdir -p /entry && printf 'print(1)\\n' > /entry/train.py
"""
# ...and one that hides weights in its own layer, deletes a flagged lower file (a whiteout)
# and replaces a lower folder (an opaque folder).
HIDING = """FROM {framework}
RUN mkdir -p /entry && printf '\\223NUMPY weights' > /entry/w.bin
RUN rm /opt/fw/weights.pt && rm -rf /opt/data && mkdir /opt/data && printf 'fresh\\n' > /opt/data/new.txt
"""


def _build(engine, folder: Path, text: str, tag: str) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Dockerfile").write_text(text)
    for _ in engine.build_image(folder, "Dockerfile", tag, build_args={}, labels={"dev.runner.test": "layers"}):
        pass
    return engine.image(tag).id


@pytest.fixture(scope="module")
def images(engine, cpu_base_image, tmp_path_factory):
    if getattr(engine, "client", None) is None:
        pytest.skip(f"the {engine.name} engine keeps no layers (its inspection reads the merged export)")
    root = tmp_path_factory.mktemp("layers")
    tags = {name: f"runner-test/layers-{name}:{os.getpid()}" for name in ("framework", "honest", "hiding")}
    framework = _build(engine, root / "framework", FRAMEWORK.format(base=cpu_base_image.tag), tags["framework"])
    built = {name: _build(engine, root / name, text.format(framework=tags["framework"]), tags[name])
             for name, text in (("honest", HONEST), ("hiding", HIDING))}
    entry = root / "entry"
    entry.mkdir()
    (entry / "train.py").write_text("print(1)\n")
    yield {"base": cpu_base_image.id, "framework": framework, "entry": entry, **built}
    for tag in reversed(tags.values()):
        engine.remove_image(tag)


def _inspect(engine, images, name: str):
    entry = images["entry"]
    return inspect_image(engine, images[name], images["base"], [], entry, entry_files(entry), None)


def _no_merged_export(engine, monkeypatch) -> None:
    """The merged export is not read: the layers alone decided."""
    def refused(ref):
        raise AssertionError(f"the merged export of {ref} was read")

    monkeypatch.setattr(engine, "image_files", refused)


@pytest.fixture
def parses(monkeypatch):
    """The diff ids of the layers parsed (not only hashed), in order."""
    seen: list[str] = []
    real = layers.parse_layer

    def counted(stream, size, read_file):
        facts, diff_id = real(stream, size, read_file)
        seen.append(diff_id)
        return facts, diff_id

    monkeypatch.setattr(layers, "parse_layer", counted)
    return seen


def _paths(audit) -> set[str]:
    return {f.path for f in audit.unexplained}


def test_layer_by_layer_the_inspection_is_the_merged_exports(engine, images, monkeypatch, tmp_path):
    for name in ("honest", "hiding"):
        monkeypatch.setenv("RUNNER_HOME", str(tmp_path / name / "layers"))
        with monkeypatch.context() as patch:
            _no_merged_export(engine, patch)
            by_layers = _inspect(engine, images, name)
        assert list((tmp_path / name / "layers" / "image-audits").glob("layer-*.json"))  # it did read layers
        monkeypatch.setenv("RUNNER_HOME", str(tmp_path / name / "merged"))
        with monkeypatch.context() as patch:
            patch.setattr(engine, "image_layers", lambda ref: None)
            merged = _inspect(engine, images, name)
        assert not list((tmp_path / name / "merged" / "image-audits").glob("layer-*.json"))
        assert by_layers.to_dict() == merged.to_dict()
        assert ("/entry/w.bin" in {f.path for f in by_layers.findings}) == (name == "hiding")


def test_a_second_image_on_the_same_layers_parses_only_its_own(engine, images, monkeypatch, tmp_path, parses):
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path))
    _no_merged_export(engine, monkeypatch)
    own = {name: list(engine.image(images[name]).layers) for name in ("framework", "honest", "hiding")}
    honest = _inspect(engine, images, "honest")
    assert set(parses) == set(own["honest"])  # the first reads every layer once (the base's in its own pass)
    assert "/opt/fw/weights.pt" in {f.path for f in honest.findings}
    parses.clear()
    hiding = _inspect(engine, images, "hiding")
    assert sorted(parses) == sorted(own["hiding"][len(own["framework"]):])  # its own two layers, not the framework's
    found = {f.path for f in hiding.findings}
    assert "/entry/w.bin" in found  # weights in its own layer are named
    # The whiteout and the opaque folder hide the flagged lower files, as in the merged view.
    assert "/opt/fw/weights.pt" not in _paths(hiding) and "/opt/data/old.pt" not in _paths(hiding)
    assert "/opt/data/new.txt" in _paths(hiding)


def _forget_answers(home: Path, image_id: str) -> None:
    """The answer kept per image id (so that the next inspection reads the layers again)."""
    for kept in (home / "image-audits").glob(image_id.removeprefix("sha256:") + "*.json"):
        kept.unlink()


def test_a_forged_layer_record_cannot_hide_a_finding(engine, images, monkeypatch, tmp_path, parses):
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path))
    _no_merged_export(engine, monkeypatch)
    _inspect(engine, images, "honest")
    assert "/entry/w.bin" in {f.path for f in _inspect(engine, images, "hiding").findings}
    top = engine.image(images["hiding"]).layers[-2]  # the layer that adds /entry/w.bin
    record = paths.home() / "image-audits" / f"layer-{top.removeprefix('sha256:')}.json"
    # 1. its facts changed under its own name: w.bin made harmless text, the seal left as it was
    kept = json.loads(record.read_text())
    kept["layer"]["files"]["entry/w.bin"][2] = b"print(1)\n".hex()
    record.write_text(json.dumps(kept))
    assert layers.load(top) is None
    _forget_answers(tmp_path, images["hiding"])
    parses.clear()
    assert "/entry/w.bin" in {f.path for f in _inspect(engine, images, "hiding").findings}
    assert top in parses  # a miss: parsed again
    # 2. another layer's record (sealed, whole) copied under this one's name
    honest_top = engine.image(images["honest"]).layers[-1]
    shutil.copy(record.with_name(f"layer-{honest_top.removeprefix('sha256:')}.json"), record)
    assert layers.load(top) is None
    _forget_answers(tmp_path, images["hiding"])
    parses.clear()
    assert "/entry/w.bin" in {f.path for f in _inspect(engine, images, "hiding").findings}
    assert top in parses


def test_a_whiteout_and_an_opaque_folder_hide_lower_files_in_the_merge():
    def layer(files=(), deleted=(), opaque=(), shadows=()):
        facts = layers.FileFacts(1, "d", b"", 0)
        return layers.LayerFacts("sha256:x", 0, {p: facts for p in files}, list(deleted), list(opaque), list(shadows))

    merged = layers.merge([layer(["a/w.pt", "a/b/c.pt", "d/x", "d/y", "e", "keep"]),
                           layer(["d/z"], deleted=["a"], opaque=["d"], shadows=["e"])])
    assert sorted(merged) == ["d/z", "keep"]
