"""A test entry that probes the run contract from inside the container.

``python3 probe.py MODE``: every mode reports through :::MLLOG events like a real entry.
  sandbox  report what the container can see and do, then ask for one evaluation of an
           untrained model
  network  try to reach the outside; exit non-zero when it can't (it must not)
  badckpt  ask for evaluations of checkpoints the runner must refuse (missing, outside /output)
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


def evaluate():
    import torch

    from tiny import build

    (OUT / "checkpoints").mkdir(parents=True, exist_ok=True)
    torch.save(build().state_dict(), OUT / "checkpoints" / "1.pt")
    log("eval_request", epoch_num=1, checkpoint="checkpoints/1.pt")


def main(mode):
    log("run_start")
    if mode == "sandbox":
        files = sorted(str(p) for p in Path("/data").rglob("*"))
        status = Path("/proc/self/status").read_text()
        caps = next(l.split()[1] for l in status.splitlines() if l.startswith("CapEff"))
        log("sandbox_probe", files=files, uid=os.getuid(), cap_eff=caps,
            network=can_connect("1.1.1.1", 53) or can_connect("pypi.org", 443),
            write_root=can_write("/probe"), write_data=can_write("/data/train/probe"),
            write_output=can_write(OUT / "probe"), write_scratch=can_write("/scratch/probe"),
            cpus=len(os.sched_getaffinity(0)), env=sorted(k for k in os.environ if k.startswith("RUNNER_")))
        evaluate()
    elif mode == "network":
        import urllib.request

        urllib.request.urlopen("https://pypi.org/simple/", timeout=5)
        evaluate()
    elif mode == "badckpt":
        log("eval_request", epoch_num=1, checkpoint="checkpoints/missing.pt")
        log("eval_request", epoch_num=2, checkpoint="../../../etc/passwd")
    elif mode == "sleep":
        log("epoch_start", epoch_num=1)
        time.sleep(600)
    log("run_stop", status="success")


if __name__ == "__main__":
    main(sys.argv[1])
