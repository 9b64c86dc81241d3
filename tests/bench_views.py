"""How long `runner ls` and `runner leaderboard --html` take over N signed runs, with the one
verdict (issue 45: every view reads what `runner verify` proves, cached by the signed
statement's digest) against a checkout of the runner from before it, in one sitting.

    python tests/bench_views.py [--runs 50] [--before PATH_TO_AN_OLDER_CHECKOUT] [--keep DIR]

The runs are synthetic but real (``tests/synthetic_result.py``: every figure computed by the
project's own functions), signed by a fresh key, plus the issue's forgery (a checkpoint's
bytes flipped, TTA 0.50 s, signed again by the trusted key) and a smoke run, all made by the
oldest checkout given so that every checkout can read them. Each command runs in a fresh
process, as a user runs it: "cold" with an empty verdict cache, "warm" the second time.
Prints one table; writes nothing outside a temporary folder (or ``--keep``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
MAKER = r'''
import os, sys
from pathlib import Path
repo, root, n = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
sys.path[:0] = [f"{repo}/tests", repo]
os.environ["RUNNER_HOME"] = str(root / "home")
from synthetic_result import make_result_folder, new_signer, stage_mnist_stand_in, edit_result
from runner.bundle import make_bundle
from runner.fingerprint import capture_host
signer, keys = new_signer(root)
staged, host = stage_mnist_stand_in(root / "home"), capture_host()
runs = root / "results" / "mnist-cnn-cpu"
for i in range(n):
    f = make_result_folder(runs / f"202611{10 + i // 24:02d}T{i % 24:02d}0203Z-s{i}-{i:06x}", staged, host, seed=i)
    edit_result(f, conforming=True, nonconforming_reasons=[])
    make_bundle(f, signer)
f = make_result_folder(runs / "20261120T000203Z-s900-f0f0f0", staged, host, seed=900)
edit_result(f, conforming=True, nonconforming_reasons=[])
ck = sorted((f / "checkpoints").rglob("*.*"))[0]
data = bytearray(ck.read_bytes()); data[-8:] = bytes(x ^ 255 for x in data[-8:]); ck.write_bytes(bytes(data))
edit_result(f, training__tta_seconds=0.5)
make_bundle(f, signer)
f = make_result_folder(runs / "smoke" / "20261121T000203Z-s901-5a5a5a", staged, host, seed=901)
edit_result(f, smoke=True, conforming=False, nonconforming_reasons=["smoke run"], training__tta_seconds=0.25)
make_bundle(f, signer)
'''


def _timed(repo: Path, root: Path, *argv: str) -> float:
    env = {**os.environ, "PYTHONPATH": str(repo), "RUNNER_HOME": str(root / "home"), "COLUMNS": "80"}
    start = time.perf_counter()
    # cwd: not a checkout (``-m`` puts the working folder first on the path, before PYTHONPATH)
    done = subprocess.run([sys.executable, "-m", "runner", *argv], env=env, capture_output=True, text=True, cwd=root)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{repo}: runner {' '.join(argv)} exited {done.returncode}: {done.stderr[-400:]}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--before", type=Path, help="an older checkout to time beside this one")
    parser.add_argument("--keep", type=Path, help="keep the runs here")
    args = parser.parse_args()
    checkouts = [("before", args.before.resolve())] if args.before else []
    checkouts.append(("now", HERE))
    root = Path(args.keep or tempfile.mkdtemp(prefix="runner-bench-views-"))
    if args.keep and root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    maker = checkouts[0][1]
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", MAKER, str(maker), str(root), str(args.runs)], check=True,
                   env={**os.environ, "PYTHONPATH": str(maker)})
    print(f"{args.runs + 2} signed runs made in {time.perf_counter() - start:.1f} s (by {maker})")
    results, keys = str(root / "results"), str(root / "trusted.pub.json")
    rows = []
    for label, repo in checkouts:
        for what, argv in (("ls", ("ls", "--results", results, "--trusted-keys", keys)),
                           ("leaderboard --html", ("leaderboard", "--results", results, "--trusted-keys", keys,
                                                   "--task", "mnist", "--html", str(root / f"site-{label}")))):
            shutil.rmtree(root / "home" / "verdicts", ignore_errors=True)  # cold: no verdict cached
            cold = _timed(repo, root, *argv)
            warm = _timed(repo, root, *argv)
            rows.append((label, what, cold, warm))
    print(f"{'checkout':<9} {'command':<20} {'cold s':>8} {'warm s':>8}")
    for label, what, cold, warm in rows:
        print(f"{label:<9} {what:<20} {cold:8.2f} {warm:8.2f}")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
