"""The leaderboard site's screenshots in ``docs/leaderboard-site/``, made from synthetic signed
results (no Docker) and photographed in headless Chromium::

    PYTHONPATH=. python tests/site_screenshots.py [OUT_DIR]      # default docs/leaderboard-site

The results: the DAWNBench fixtures' claims (tests/data/dawnbench/) and the entry mnist-cnn-cpu's
claim, exported from one of its runs and imported back (its curve a little faster, its own
claimed TTA); three runs of mnist-cnn-cpu that count, every evaluation between 99.1 and 99.4 %
top-1 (the threshold 99.3), at three paces; a run of it that timed out after 612 s (incomplete:
it does not count, and must not stretch the time axis); a run on other hardware whose items
are slower (non-conforming); and an entry, mnist-other, none of whose runs counts. The site is
built with ``runner leaderboard --html``; the index, the MNIST task page and mnist-cnn-cpu's
reproduction page are photographed, and the reproduction's two plots copied as they are. Each
PNG is cut to 256 colours (a screenshot under 300 KB).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))

import synthetic_result  # noqa: E402  (beside this file)
from securesystemslib.signer import CryptoSigner  # noqa: E402

from runner.bundle import make_bundle  # noqa: E402
from runner.cli import main as runner_main  # noqa: E402
from runner.dawnbench import export_dawnbench, import_dawnbench, save_claim  # noqa: E402
from runner.dawnbench.claims import load_claims  # noqa: E402
from runner.dawnbench.exporter import file_name  # noqa: E402
from runner.fingerprint import capture_host  # noqa: E402
from runner.inference.measure import evaluate_backend  # noqa: E402
from runner.keys import public_key_dict  # noqa: E402
from runner.profiles import load_profile  # noqa: E402
from runner.tasks import get_task  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
DOCS = TESTS.parent / "docs" / "leaderboard-site"
FIXTURES = TESTS / "data" / "dawnbench"
ENTRY = "mnist-cnn-cpu"
AUTHOR = "Jane Doe"
TIMEOUT_S = 612

# run id: (seed, pace, wrong answers per evaluation of 10,000; None: as the helper makes them)
COUNTED = {
    "20261122T010203Z-s0-aaaaaa": (0, 1.0, (88, 66, 61)),   # 99.12, 99.34, 99.39 %
    "20261122T040000Z-s2-eeeeee": (2, 1.25, (83, 69, 58)),  # 99.17, 99.31, 99.42
    "20261122T050000Z-s3-ffffff": (3, 0.85, (90, 74, 64)),  # 99.10, 99.26, 99.36
}
TIMED_OUT = ("20261122T060000Z-s4-dddddd", 4, 44.0, (140, 95, 69))  # 98.60, 99.05, 99.31 % at 600 s
SLOWER = ("20261122T070000Z-s5-cccccc", 5, 1.1, (85, 67, 60))  # another host: non-conforming, slower items


def _run(folder: Path, staged, host: dict, seed: int, pace: float, wrong: tuple[int, ...]) -> Path:
    original = synthetic_result.WRONG_PER_EVAL
    synthetic_result.WRONG_PER_EVAL = wrong
    try:
        return synthetic_result.make_result_folder(folder, staged, host, seed=seed, pace=pace)
    finally:
        synthetic_result.WRONG_PER_EVAL = original


def _latencies(folder: Path, staged, seed: int, median_ms: float) -> None:
    """Its torch latencies as a CPU gives them (a lognormal body around ``median_ms``, a tail of
    three items in a thousand up to three times slower), the inference record recomputed from them."""
    backend = folder / "inference" / "torch"
    rng = np.random.default_rng([seed, 45])
    ms = median_ms * rng.lognormal(0.0, 0.06, staged.load_eval_labels().size)
    tail = rng.random(ms.size) < 0.003
    ms[tail] *= rng.uniform(1.2, 3.0, int(tail.sum()))
    latencies = (ms * 1e6).astype(np.int64)
    np.save(backend / "latencies_ns.npy", latencies)
    # The inference window stays the run's own (its events time it; verify recomputes it from them).
    window = json.loads((folder / "result.json").read_text())["inference"]["torch"]["window_seconds"]
    assert latencies.sum() / 1e9 < window, "the items must fit in the run's inference window"
    record = evaluate_backend("torch", backend, get_task("mnist"), staged.load_eval_labels(), window,
                              load_profile(synthetic_result.PROFILE).price.usd_per_hour)
    record["final_model_disagreement"] = 0.0
    synthetic_result.edit_result(folder, inference__torch=record)


def build_results(root: Path) -> tuple[Path, Path]:
    """``root/results`` and ``root/trusted.pub.json``: the runs and claims described above."""
    results = root / "results"
    signer = CryptoSigner.generate_ed25519()
    keys = root / "trusted.pub.json"
    keys.write_text(json.dumps(public_key_dict(signer.public_key)))
    os.environ["RUNNER_HOME"] = str(root / "home")
    staged, host = synthetic_result.stage_mnist_stand_in(root / "home"), capture_host()
    names = [file_name(AUTHOR, "small-bn-cnn", "cpu-2core-x86", fw) for fw in ("pytorch 2.13.0+cpu", "torch")]
    claimed = {"tta_seconds": 9.5, "dawnbench": names}
    for run_id, (seed, pace, wrong) in COUNTED.items():
        folder = _run(results / ENTRY / run_id, staged, host, seed, pace, wrong)
        _latencies(folder, staged, seed, 0.21 + 0.004 * seed)
        synthetic_result.edit_result(folder, conforming=True, nonconforming_reasons=[], entry__claimed=claimed)
        make_bundle(folder, signer)
    run_id, seed, pace, wrong = TIMED_OUT
    folder = _run(results / ENTRY / run_id, staged, host, seed, pace, wrong)
    _latencies(folder, staged, seed, 0.22)
    synthetic_result.edit_result(folder, conforming=True, nonconforming_reasons=[], entry__claimed=claimed,
                                 status="incomplete", incomplete_reason=f"timed out after {TIMEOUT_S} s")
    make_bundle(folder, signer)
    run_id, seed, pace, wrong = SLOWER
    folder = _run(results / ENTRY / run_id, staged, host, seed, pace, wrong)
    _latencies(folder, staged, seed, 0.27)
    synthetic_result.edit_result(folder, conforming=False, entry__claimed=claimed,
                                 nonconforming_reasons=["hardware mismatch: cpu model"])
    make_bundle(folder, signer)
    for k, pace in enumerate((1.6, 2.2)):  # another entry: no run of it counts
        folder = _run(results / "mnist-other" / f"20261122T02000{k}Z-s{k + 6}-bbbbb{k}", staged, host, k + 6, pace,
                      (300 - 100 * k, 120, 65))
        _latencies(folder, staged, k + 6, 0.3)
        synthetic_result.edit_result(folder, conforming=False, nonconforming_reasons=["hardware mismatch: cpu model"],
                                     entry__name="mnist-other")
        make_bundle(folder, signer)

    export_dawnbench(results / ENTRY / next(iter(COUNTED)), root / "export", AUTHOR, trusted_keys=[signer.public_key])
    for source in (FIXTURES, root / "export"):
        report = import_dawnbench(source)
        assert not report.failures, report.failures
        for claim in report.claims:
            save_claim(results, claim)
    (claim,) = [c for c in load_claims(results) if c.name in names and c.kind == "train"]
    faster = [dataclasses.replace(p, hours=p.hours * 0.8) for p in claim.curve]
    save_claim(results, dataclasses.replace(claim, curve=faster))
    return results, keys


def _chromium(page: Path, shot: Path, profile: Path, height: int) -> None:
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", "--virtual-time-budget=10000", f"--window-size=1280,{height}",
         f"--screenshot={shot}", page.as_uri()],
        check=False, capture_output=True, text=True, timeout=120,
    )
    if done.returncode != 0 or not shot.is_file():
        raise SystemExit(f"chromium failed on {page}: {done.stderr[-2000:]}")


def _small(png: Path) -> None:
    """Cut to 256 colours: a screenshot of text and plots loses nothing a reader sees."""
    from PIL import Image  # lazy: optional (Pillow: matplotlib's dependency, needed here only)

    with Image.open(png) as image:
        image.convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT).save(png, optimize=True)


PAGES = (  # (page of the site, screenshot, window height)
    ("index.html", "index.png", 760),
    ("tasks/mnist.html", "task.png", 1300),
    (f"reproductions/{ENTRY}.html", "reproduction.png", 1700),
)
PLOTS = ((f"reproductions/{ENTRY}/curve.png", "curve.png"),
         (f"reproductions/{ENTRY}/latency-torch.png", "latency-torch.png"))


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else DOCS
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        results, keys = build_results(root)
        site = root / "site"
        with contextlib.redirect_stdout(io.StringIO()):  # the tables it prints
            code = runner_main(["leaderboard", "--results", str(results), "--trusted-keys", str(keys),
                                "--html", str(site)])
        if code != 0:
            raise SystemExit(f"runner leaderboard exited {code}")
        for k, (page, name, height) in enumerate(PAGES):
            _chromium(site / page, out / name, root / f"profile-{k}", height)
            _small(out / name)
        for plot, name in PLOTS:
            shutil.copyfile(site / plot, out / name)
    for name in [n for _, n, _ in PAGES] + [n for _, n in PLOTS]:
        print(f"{out / name}: {(out / name).stat().st_size // 1024} KB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
