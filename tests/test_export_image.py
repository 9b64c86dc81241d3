"""``runner export image ENTRY``: the entry's image as a digest-named ``docker save`` archive
(what an Apptainer site converts), with the image id every result of the entry names."""

from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path

import pytest

from runner.cli import main

pytestmark = pytest.mark.docker
PROBE = Path(__file__).parent / "entries" / "contract-probe"


def test_the_archive_is_named_by_its_digest_and_holds_the_image(engine, tmp_path, capsys):
    from runner.entry_build import build_entry
    from runner.manifest import load_entry

    assert main(["export", "image", str(PROBE), "--smoke", "--out", str(tmp_path)]) == 0
    (archive,) = tmp_path.glob("contract-probe-sha256-*.tar")
    record = json.loads(archive.with_suffix(".json").read_text())
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    assert record["archive_sha256"] == digest and archive.name == f"contract-probe-sha256-{digest[:16]}.tar"
    built = build_entry(load_entry(PROBE).for_smoke(), engine)
    assert record["image_id"] == built.image_id
    with tarfile.open(archive) as tar:
        manifest = json.loads(tar.extractfile("manifest.json").read())
    assert manifest[0]["Config"].removeprefix("blobs/sha256/").removesuffix(".json") in built.image_id
    assert record["convert"].startswith("apptainer build contract-probe.sif docker-archive:")
    assert not list(tmp_path.glob(".*partial*"))
