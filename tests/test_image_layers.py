"""The image inspection layer by layer (issue 50): each layer read once and its facts kept by
its diff id; a second image on the same lower layers parses only its own, a kept record
cannot hide a finding, and whiteouts are judged as the merged view."""

from __future__ import annotations

import hashlib
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
    real, real_folder = layers.parse_layer, layers.parse_folder

    def counted(stream, size, read_file):
        facts, diff_id = real(stream, size, read_file)
        seen.append(diff_id)
        return facts, diff_id

    def counted_folder(folder, diff_id, read_file):
        seen.append(diff_id)
        return real_folder(folder, diff_id, read_file)

    monkeypatch.setattr(layers, "parse_layer", counted)
    monkeypatch.setattr(layers, "parse_folder", counted_folder)
    return seen


def _paths(audit) -> set[str]:
    return {f.path for f in audit.unexplained}


def test_layer_by_layer_the_inspection_is_the_merged_exports(engine, images, monkeypatch, tmp_path):
    """Read in place in the engine's store, or from its ``docker save`` stream, the layers
    give the audit the merged export gives."""
    for name in ("honest", "hiding"):
        by_layers = {}
        for how in ("folders", "stream"):
            monkeypatch.setenv("RUNNER_HOME", str(tmp_path / name / how))
            with monkeypatch.context() as patch:
                _no_merged_export(engine, patch)
                if how == "stream":
                    patch.setattr(engine, "image_layer_folders", lambda ref: None)
                else:
                    patch.setattr(engine, "image_layers", lambda ref: pytest.fail("the image was exported"))
                by_layers[how] = _inspect(engine, images, name)
            assert list((tmp_path / name / how / "image-audits").glob("layer-*.json"))  # it did read layers
        monkeypatch.setenv("RUNNER_HOME", str(tmp_path / name / "merged"))
        with monkeypatch.context() as patch:
            patch.setattr(engine, "image_layers", lambda ref: None)
            patch.setattr(engine, "image_layer_folders", lambda ref: None)
            merged = _inspect(engine, images, name)
        assert not list((tmp_path / name / "merged" / "image-audits").glob("layer-*.json"))
        for how, inspection in by_layers.items():
            assert inspection.to_dict() == merged.to_dict(), how
            assert ("/entry/w.bin" in {f.path for f in inspection.findings}) == (name == "hiding")


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


# Hard links, a symbolic link, a whiteout and an opaque folder in one layer: the cases where a
# layer's folder and its exported tar say the same thing differently.
# Also: folders nested deeper than Python recurses, and the attribute a rootless overlay2 reads
# as "opaque" set by the step itself on a folder with lower files (a root overlay2 ignores it,
# so the container still sees them, and so must the inspection).
LINKS = """FROM {framework}
RUN mkdir -p /entry/sub && printf 'a' > /entry/sub/first && ln /entry/sub/first /entry/sub/second \
    && ln /entry/sub/first /entry/zlast && ln -s first /entry/sub/link && mkfifo /entry/pipe \
    && rm /opt/fw/lib.py && rm -rf /opt/data && mkdir /opt/data && printf 'b' > /opt/data/new.txt \
    && mkdir -p /entry/deep/$(printf 'd/%.0s' $(seq 1100)) && printf 'c' > /entry/deep/$(printf 'd/%.0s' $(seq 1100))w.pt \
    && printf 'y = 3\\n' > /opt/fw/mine.py \
    && (python3 -c "import os; os.setxattr('/opt/fw', 'user.overlay.opaque', b'y')" || true)
"""


def _facts_by_both_reads(engine, image_id: str) -> list[tuple[layers.LayerFacts, layers.LayerFacts]]:
    """Each layer of the image as its folder in the engine's store gives it and as the
    engine's ``docker save`` stream gives it."""
    info, folders = engine.image_layer_folders(image_id)
    _, chunks = engine.image_layers(image_id)

    def read_file(path, size, mtime, fh):
        data = fh.read()
        return layers.FileFacts(size, hashlib.sha256(data).hexdigest(), data[:16], mtime)

    streamed: dict[str, layers.LayerFacts] = {}
    import io as _io

    from runner.entry_build.image_inspection import _Chunks

    for member, fh in layers.image_members(_io.BufferedReader(_Chunks(chunks), buffer_size=1 << 20)):
        if fh is not None and (member.name.endswith(".tar") or member.name.startswith("blobs/sha256/")):
            try:
                facts, diff_id = layers.parse_layer(fh, member.size, read_file)
            except Exception:  # noqa: BLE001 - the configuration blob, not a layer
                continue
            streamed[diff_id] = facts
    return [(layers.parse_folder(folder, diff_id, read_file), streamed[diff_id])
            for diff_id, folder in zip(info.layers, folders)]


def test_a_layer_folder_gives_the_facts_its_exported_tar_gives(engine, images, tmp_path):
    if engine.image_layer_folders(images["honest"]) is None:
        pytest.skip(f"the {engine.name} engine's layers are not readable in place here")
    links = _build(engine, tmp_path / "links", LINKS.format(framework=images["framework"]),
                   f"runner-test/layers-links:{os.getpid()}")
    try:
        pairs = _facts_by_both_reads(engine, links)
        assert len(pairs) == len(engine.image(links).layers)
        for folder, tar in pairs:
            assert folder.files == tar.files, folder.diff_id
            for part in ("deleted", "opaque", "shadows"):
                assert sorted(getattr(folder, part)) == sorted(getattr(tar, part)), (part, folder.diff_id)
        top = pairs[-1][0]
        assert "entry/sub/first" in top.files and {"entry/sub/second", "entry/zlast"} <= set(top.shadows)
        assert {"entry/sub/link", "entry/pipe"} <= set(top.shadows)
        assert top.deleted == ["opt/fw/lib.py"] and top.opaque == ["opt/data"]  # not opt/fw
        deep = [p for p in top.files if p.endswith("/w.pt")]
        assert len(deep) == 1 and deep[0].count("/") > 1100
        merged = layers.merge([folder for folder, _ in pairs])
        assert "opt/fw/more.py" in merged and "opt/fw/mine.py" in merged and "opt/fw/lib.py" not in merged
    finally:
        engine.remove_image(links)


def test_in_the_store_a_second_image_reads_no_byte_of_the_shared_layers(engine, images, monkeypatch, tmp_path):
    """With the layers read in place, the shared ones are not exported, hashed or opened."""
    if engine.image_layer_folders(images["honest"]) is None:
        pytest.skip(f"the {engine.name} engine's layers are not readable in place here")
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path))
    _no_merged_export(engine, monkeypatch)
    monkeypatch.setattr(engine, "image_layers", lambda ref: pytest.fail("the image was exported"))
    _inspect(engine, images, "honest")
    opened: list[str] = []
    real = layers.parse_folder
    monkeypatch.setattr(layers, "parse_folder", lambda folder, diff_id, read_file: (
        opened.append(diff_id), real(folder, diff_id, read_file))[1])
    hiding = _inspect(engine, images, "hiding")
    own = list(engine.image(images["hiding"]).layers)
    assert sorted(opened) == sorted(own[len(engine.image(images["framework"]).layers):])
    assert "/entry/w.bin" in {f.path for f in hiding.findings}



def test_a_kept_layer_is_searched_for_another_evaluation_set_without_being_parsed(engine, images, monkeypatch,
                                                                                  tmp_path, parses):
    """A second entry with another evaluation set finds the layers kept but not searched for
    its set: they are searched (read in place, not parsed again), and a copy of its set in a
    shared lower layer is found."""
    import numpy as np

    from runner import data

    if engine.image_layer_folders(images["honest"]) is None:
        pytest.skip(f"the {engine.name} engine's layers are not readable in place here")
    sets = {name: data.synthetic("mnist", tmp_path / name, n_train=16, n_eval=40, seed=seed)
            for name, seed in (("first", 1), ("second", 2))}
    folder = tmp_path / "carrier"
    folder.mkdir()
    (folder / "blob.bin").write_bytes(np.load(sets["second"].eval_dir / "images.npy")[:12].tobytes())
    carrier = _build(engine, folder, f"FROM {images['framework']}\nCOPY blob.bin /opt/blob.bin\n"
                     "RUN printf 'print(3)\\n' > /opt/top.py\n", f"runner-test/layers-carrier:{os.getpid()}")
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path / "home"))
    _no_merged_export(engine, monkeypatch)
    monkeypatch.setattr(engine, "image_layers", lambda ref: pytest.fail("the image was exported"))
    entry = images["entry"]

    def inspect(staged):
        return inspect_image(engine, carrier, images["base"], [], entry, entry_files(entry),
                             staged.eval_dir / "images.npy", staged.labels / "eval_labels.npy")

    try:
        first = inspect(sets["first"])
        assert not first.eval_copies and set(parses) == set(engine.image(carrier).layers)
        parses.clear()
        second = inspect(sets["second"])
        assert parses == []  # every layer was kept: searched, not parsed again
        assert [(c.path, c.items) for c in second.eval_copies] == [("/opt/blob.bin", 12)]
        assert "class 4" in (second.problem() or "")
        kept = layers.load(engine.image(carrier).layers[-2])  # the layer COPY made
        assert kept is not None and len(kept.copies) == 2  # both sets' searches kept
    finally:
        engine.remove_image(carrier)


def test_a_store_that_changes_under_the_reading_falls_back_to_the_engines_stream(engine, images, monkeypatch,
                                                                                   tmp_path):
    """A layer folder gone while it is read (an image removed meanwhile): the stream decides."""
    if engine.image_layer_folders(images["honest"]) is None:
        pytest.skip(f"the {engine.name} engine's layers are not readable in place here")
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path))
    _no_merged_export(engine, monkeypatch)

    def gone(folder, diff_id, read_file):
        raise FileNotFoundError(2, "No such file or directory", str(folder))

    monkeypatch.setattr(layers, "parse_folder", gone)
    streamed: list[str] = []
    real = engine.image_layers
    monkeypatch.setattr(engine, "image_layers", lambda ref: (streamed.append(ref), real(ref))[1])
    hiding = _inspect(engine, images, "hiding")
    assert images["hiding"] in streamed  # (and the base, which is read for its file index)
    assert "/entry/w.bin" in {f.path for f in hiding.findings}
