"""Data pasted into the entry's own files, and code that reaches into the runner's harness
(threat-model class 4): runner/entry_build/entry_scan.py, read on the host without Docker."""

from __future__ import annotations

import base64
import os
import zlib
from pathlib import Path

import numpy as np
import pytest

from runner.entry_build.context import entry_files
from runner.entry_build.entry_scan import RUN_LIMIT_BYTES, TOTAL_LIMIT_BYTES, scan_entry
from runner.entry_build.image_inspection import ImageInspection

REPO = Path(__file__).parent.parent
# The project's honest entries: every folder with a manifest but the cheats (tests/entries/
# shipped-networks is no entry: it holds the cheats' networks, some as base64 on purpose).
HONEST = sorted(p for p in (REPO / "entries").iterdir() if p.is_dir()) + sorted(
    p for p in (REPO / "tests" / "entries").iterdir()
    if p.is_dir() and not p.name.startswith("cheat-") and (p / "entry.yaml").is_file())


def _entry(tmp_path: Path, files: dict[str, str | bytes]) -> Path:
    folder = tmp_path / "entry"
    folder.mkdir(parents=True)
    (folder / "train.py").write_text("import torch\n\nprint('training')\n")
    for name, text in files.items():
        path = folder / name
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)
    return folder


def _scan(folder: Path):
    return scan_entry(folder, entry_files(folder))


def _fp16_weights(count: int) -> bytes:
    return np.random.default_rng(0).standard_normal(count).astype(np.float16).tobytes()


@pytest.mark.parametrize("entry", HONEST, ids=lambda p: p.name)
def test_the_projects_honest_entries_embed_nothing(entry):
    scan = _scan(entry)
    assert scan.problem() is None and scan.oversized == [] and scan.harness == []
    assert scan.total_bytes < TOTAL_LIMIT_BYTES // 8  # the lock's hashes, a few constants


def test_a_150_kb_base64_network_split_over_short_lines_is_named_with_its_lines_and_size(tmp_path):
    blob = base64.b64encode(_fp16_weights(61_000 * 1 + 14_000)).decode()  # ~150 KB of base64
    lines = "".join(f'    "{blob[i:i + 40]}"\n' for i in range(0, len(blob), 40))
    model = f'"""A small CNN."""\nimport torch\n\nWEIGHTS = (\n{lines})\n\n\ndef build_model():\n    return None\n'
    folder = _entry(tmp_path, {"model.py": model})
    scan = _scan(folder)
    (run,) = scan.oversized
    assert run.path == "model.py" and run.line == 5 and run.last_line == 4 + len(range(0, len(blob), 40))
    assert run.kinds == ["base64"] and abs(run.bytes - len(blob) * 3 // 4) < 64
    audit = ImageInspection(entry_scan=scan)
    reason = audit.problem()
    assert reason.startswith("class 4 (a model trained before the run): ")
    assert f"model.py line 5-{run.last_line}" in reason and str(run.bytes) in reason
    assert audit.summary()["embedded_data"][0]["path"] == "model.py"


def test_chunks_assigned_one_per_variable_are_one_run(tmp_path):
    blob = base64.b64encode(_fp16_weights(8_000)).decode()
    model = "".join(f'W{i} = "{blob[j:j + 60]}"\n' for i, j in enumerate(range(0, len(blob), 60)))
    scan = _scan(_entry(tmp_path, {"model.py": model}))
    (run,) = scan.oversized
    assert run.line == 1 and run.bytes > RUN_LIMIT_BYTES


def test_hex_and_escaped_bytes_literals_are_found(tmp_path):
    raw = _fp16_weights(6_000)
    hexed = "".join(f'    "{raw[i:i + 32].hex()}"\n' for i in range(0, len(raw), 32))
    escaped = "W = b'" + "".join(f"\\x{b:02x}" for b in raw) + "'\n"
    scan = _scan(_entry(tmp_path, {"a.py": f"H = (\n{hexed})\n", "b.py": escaped}))
    found = {r.path: r for r in scan.oversized}
    assert found["a.py"].kinds == ["hex"] and abs(found["a.py"].bytes - len(raw)) < 64
    assert found["b.py"].kinds == ["escaped bytes"] and abs(found["b.py"].bytes - len(raw)) < 64
    # Python's own repr of bytes mixes printable characters with the escapes
    scan = _scan(_entry(tmp_path / "repr", {"c.py": f"W = {raw!r}\n"}))
    assert [r.path for r in scan.oversized] == ["c.py"]


def test_a_numpy_array_literal_is_found(tmp_path):
    weights = np.random.default_rng(1).standard_normal((40, 100)).astype(np.float32)
    text = np.array2string(weights, separator=", ", threshold=10**9, precision=5, max_line_width=100)
    model = f"import numpy as np\n\nW = np.array({text}, dtype=np.float32)\n"
    (run,) = _scan(_entry(tmp_path, {"model.py": model})).oversized
    assert run.kinds == ["numbers"] and run.line == 3 and run.bytes > RUN_LIMIT_BYTES


def test_other_alphabets_are_found_by_how_little_they_compress(tmp_path):
    packed = base64.a85encode(zlib.compress(os.urandom(12_000))).decode().replace("\\", "!").replace('"', "#")
    model = "".join(f'"{packed[i:i + 50]}"\n' for i in range(0, len(packed), 50))
    (run,) = _scan(_entry(tmp_path, {"model.py": model})).oversized
    assert run.kinds == ["incompressible text"] and run.bytes > RUN_LIMIT_BYTES


def test_runs_under_the_limit_still_count_toward_the_total(tmp_path):
    files = {}
    for k in range(4):  # four files of ~6 KB each: no run over the limit, 24 KB in all
        blob = base64.b64encode(_fp16_weights(3_000 + k)).decode()
        files[f"part{k}.py"] = "".join(f'"{blob[i:i + 64]}"\n' for i in range(0, len(blob), 64))
    scan = _scan(_entry(tmp_path, files))
    assert scan.oversized == [] and scan.total_bytes > TOTAL_LIMIT_BYTES
    assert "in all" in scan.problem() and "part0.py" in scan.problem()


def test_a_binary_file_counts_whole(tmp_path):
    scan = _scan(_entry(tmp_path, {"table.bin": os.urandom(20_000)}))
    (run,) = scan.oversized
    assert run.path == "table.bin" and run.kinds == ["binary file"] and run.bytes == 20_000


def test_code_that_reaches_into_the_harness_is_named(tmp_path):
    builder = (
        "import sys\n"
        "import harness.evaluate as ev\n"
        "def build_model():\n"
        "    scorer = sys.modules['harness.evaluate']\n"
        "    caller = sys._getframe(1)\n"
        "    open('/opt/runner/harness/evaluate.py')\n"
    )
    scan = _scan(_entry(tmp_path, {"model.py": builder}))
    lines = {(h.line, h.what) for h in scan.harness}
    assert (2, "imports the harness") in lines
    assert {4, 5, 6} <= {line for line, _ in lines}
    assert "reaches into the runner's harness: model.py line 2" in scan.problem()


def test_the_word_harness_in_prose_is_not_a_reach(tmp_path):
    model = '"""The runner\'s harness loads the weights."""\n# the harness stamps each line\nHARNESS = 1\n'
    assert _scan(_entry(tmp_path, {"model.py": model})).harness == []
