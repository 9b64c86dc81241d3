"""A test entry that probes the run contract from inside the container.

``python3 probe.py MODE``: every mode reports through :::MLLOG events like a real entry.
  sandbox  report what the container can see and do, then one evaluation of the right size
  network  try to reach the outside; exit non-zero when it can't (it must not)
  short    one evaluation with one prediction too few
  sleep    start, then hang (a run killed midway)
"""

import json
import os
import socket
import sys
import time
from pathlib import Path

import numpy as np

OUT = Path(os.environ.get("RUNNER_OUTPUT", "/output"))
DATA = Path(os.environ.get("RUNNER_DATA", "/data"))


def log(key, value=None, **metadata):
    line = {"namespace": "", "time_ms": time.time() * 1000, "event_type": "POINT_IN_TIME",
            "key": key, "value": value, "metadata": metadata}
    print(":::MLLOG " + json.dumps(line), flush=True)


def can_connect(host, port):
    try:
        socket.create_connection((host, port), timeout=3).close()
        return True
    except OSError:
        return False


def can_write(path):
    try:
        Path(path).write_text("x")
        return True
    except OSError:
        return False


def evaluate(n):
    (OUT / "predictions").mkdir(parents=True, exist_ok=True)
    log("eval_start", epoch_num=1)
    np.save(OUT / "predictions" / "eval-1.npy", np.zeros(n, dtype=np.int64))
    log("eval_stop", epoch_num=1, predictions="predictions/eval-1.npy")


def main(mode):
    log("run_start")
    n = len(np.load(DATA / "eval" / "images.npy", mmap_mode="r"))
    if mode == "sandbox":
        files = sorted(str(p) for p in Path("/data").rglob("*"))
        status = Path("/proc/self/status").read_text()
        caps = next(l.split()[1] for l in status.splitlines() if l.startswith("CapEff"))
        log("sandbox_probe", files=files, uid=os.getuid(), cap_eff=caps,
            network=can_connect("1.1.1.1", 53) or can_connect("pypi.org", 443),
            write_root=can_write("/probe"), write_data=can_write("/data/train/probe"),
            write_output=can_write(OUT / "probe"), write_scratch=can_write("/scratch/probe"),
            cpus=len(os.sched_getaffinity(0)), env=sorted(k for k in os.environ if k.startswith("RUNNER_")))
        evaluate(n)
    elif mode == "network":
        import urllib.request

        urllib.request.urlopen("https://pypi.org/simple/", timeout=5)
        evaluate(n)
    elif mode == "short":
        evaluate(n - 1)
    elif mode == "sleep":
        log("epoch_start", epoch_num=1)
        time.sleep(600)
    log("run_stop", status="success")


if __name__ == "__main__":
    main(sys.argv[1])
