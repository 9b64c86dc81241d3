"""``runner reproduce --slurm`` with ``RUNNER_ENGINE=charliecloud`` on the real local Slurm.

Charliecloud keeps its images in a folder under RUNNER_HOME, which the nodes share like the
results: the submit host builds the entry's image once, before submitting, and each task,
on its own slurmd "node", finds it by its tag and runs it in its own cgroups and namespaces
(the tasks run as root, like the runner here). The entry is the contract probe with a
manifest of its own (a fresh image tag), so the one build is this test's, seen happening.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest
import yaml

from runner.bundle.filelist import ENVELOPE, SIGNER_KEY
from runner.cli import main
from runner.engine.charliecloud import storage_name
from runner.entry_build.context import content_key
from runner.entry_build.entry_image import image_tag
from runner.images import ensure_base
from runner.keys import generate
from runner.results.layout import entry_runs

pytestmark = [pytest.mark.slurm]
PROBE = Path(__file__).parent.parent / "entries" / "contract-probe"
CPU_BASE = "python3.11-bookworm"


@pytest.fixture
def charliecloud(monkeypatch):
    """The nodes' engine is Charliecloud (RUNNER_ENGINE reaches the tasks through --export=ALL),
    with the CPU base image in its storage (imported once per RUNNER_HOME)."""
    from runner.engine import ensure_engine

    monkeypatch.setenv("RUNNER_ENGINE", "charliecloud")
    engine = ensure_engine(install=True)
    yield engine, ensure_base(CPU_BASE, engine)
    engine.close()


@pytest.fixture
def fresh_probe(tmp_path, charliecloud):
    """(entry folder, its image's tag): the contract probe under a manifest no image was built
    from yet; the image is removed after, whatever the test did."""
    engine, base = charliecloud
    folder = tmp_path / "contract-probe"
    shutil.copytree(PROBE, folder)
    manifest = yaml.safe_load((folder / "entry.yaml").read_text())
    manifest["description"] = f"charliecloud on slurm {uuid.uuid4().hex}"  # a content key of its own
    (folder / "entry.yaml").write_text(yaml.safe_dump(manifest))
    tag = image_tag("contract-probe", content_key(folder, base.id, folder / "requirements.lock"))
    assert engine.find_image(tag) is None
    yield folder, tag
    if engine.find_image(tag):
        engine.remove_image(tag)
    # Its build's dependency stage too (ch-image keeps it as an image of its own).
    assert not [p for p in (engine.storage() / "img").iterdir() if p.name.startswith(storage_name(tag))]


def test_the_submit_host_builds_the_charliecloud_image_once_and_each_node_runs_it(
        fresh_probe, local_slurm, tmp_path, monkeypatch, host_load_is_not_the_subject, capsys):
    entry, tag = fresh_probe
    results = tmp_path / "results"
    keys = generate(tmp_path / "submit-host-keys")
    monkeypatch.setenv("RUNNER_RESULTS", str(results))
    monkeypatch.setenv("RUNNER_SIGNING_KEY", str(keys.private))
    # The pair partition: two one-node tasks, one on each slurmd node, at the same time.
    code = main(["reproduce", str(entry), "--smoke", "--no-infer", "--seed", "0", "--runs", "2",
                 "--slurm", "--partition", local_slurm.pair_partition])
    out = capsys.readouterr().out
    (jobs,) = (results / ".slurm" / "contract-probe").iterdir()
    logs = [(jobs / f"task-{i}.out").read_text() for i in (0, 1)]
    assert code == 0, (out, logs)
    # Built here, once, before the job was submitted...
    assert out.count("on this host, for the tasks: the charliecloud engine's images are under") == 1
    assert out.count(" built in ") == 1 and " cache hit in " not in out
    # ...and found by its tag on each node: no task built it again.
    for log in logs:
        assert " cache hit in " in log and " built in " not in log, log[-3000:]
    folders = {json.loads((p / "result.json").read_text())["seed"]: p for p in entry_runs(results, "contract-probe")}
    assert sorted(folders) == [0, 1]
    results_of = {seed: json.loads((folder / "result.json").read_text()) for seed, folder in folders.items()}
    assert {r["slurm"]["node"] for r in results_of.values()} == set(local_slurm.nodes)
    assert {r["image"]["tag"] for r in results_of.values()} == {tag}  # the one image, on both nodes
    assert len({r["image"]["id"] for r in results_of.values()}) == 1
    for seed, folder in folders.items():
        result = results_of[seed]
        assert result["status"] == "complete" and result["slurm"]["state"] == "COMPLETED", result
        fingerprint = json.loads((folder / "fingerprint.json").read_text())
        assert fingerprint["docker"]["engine"] == "charliecloud"
        assert json.loads((folder / SIGNER_KEY).read_text())["keyid"] == keys.keyid
        assert (folder / ENVELOPE).is_file()
        # Signed on the submit host, and the bundle verifies (a smoke run: verified, does not count).
        capsys.readouterr()
        assert main(["verify", str(folder), "--trusted-keys", str(keys.public), "--json"]) == 3
        report = json.loads(capsys.readouterr().out)
        assert report["ok"] is True, [c for c in report["checks"] if not c["ok"]]
