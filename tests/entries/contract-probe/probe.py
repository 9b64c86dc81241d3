"""A test entry that probes the run contract from inside the container.

``python3 probe.py MODE``: every mode reports through :::MLLOG events like a real entry.
  sandbox  report what the container can see and do, then ask for one evaluation of an
           untrained model
  network  try to reach the outside; exit non-zero when it can't (it must not)
  badckpt  ask for evaluations of checkpoints the runner must refuse (missing, outside /output)
  sleep    start, then hang (a run killed midway)
  nap      a few seconds of "training", then one good evaluation (runs that overlap)
  fill     write into /output until stopped (the output quota)
  hostile  hostile event lines and predictions, then one good evaluation and run_stop
  cross    a model that meets the threshold on the smoke data, asked for twice (epochs 1, 2)
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


def untrained():
    """The model as the runner's draw starts it (run contract, "Initial weights")."""
    from tiny import build

    model = build()
    if os.path.isdir(os.environ.get("RUNNER_INIT", "/init")):
        sys.path.insert(0, os.environ.get("RUNNER_INIT", "/init"))
        import runner_init

        runner_init.load(model)
    return model


def evaluate():
    import torch

    (OUT / "checkpoints").mkdir(parents=True, exist_ok=True)
    torch.save(untrained().state_dict(), OUT / "checkpoints" / "1.pt")
    log("eval_request", epoch_num=1, checkpoint="checkpoints/1.pt")


def block_reader():
    """The smoke data's rule written into the linear head: class c's score is the
    brightness of c's block (runner/data/blocks.py), so it meets any threshold there."""
    import torch

    from tiny import build

    model = build()
    weight = torch.zeros(10, 28, 28)
    cell = 28 // 4
    for c in range(10):
        row, col = divmod(c, 4)
        top, left = row * cell + cell // 4, col * cell + cell // 4
        weight[c, top:top + cell // 2, left:left + cell // 2] = 1.0
    with torch.no_grad():
        model.head.weight.copy_(weight.reshape(10, -1))
        model.head.bias.zero_()
    return model


def cross():
    import torch

    (OUT / "checkpoints").mkdir(parents=True, exist_ok=True)
    for epoch in (1, 2):
        torch.save(block_reader().state_dict(), OUT / "checkpoints" / f"{epoch}.pt")
        log("eval_request", epoch_num=epoch, checkpoint=f"checkpoints/{epoch}.pt")


def hostile():
    """Lines and files that used to kill the runner's listener or its evaluation."""
    print(':::MLLOG {"key": "deep", "value": ' + "[" * 200_000 + "]" * 200_000 + "}", flush=True)
    print(':::MLLOG {"key": "deep", "value": ' + "[" * 10_000 + "]" * 10_000 + "}", flush=True)
    print(':::MLLOG {"key": "bigint", "value": ' + "7" * 5000 + "}", flush=True)
    print(':::MLLOG {"key": "long", "value": "' + "x" * 200_000 + '"}', flush=True)
    print("no newline for a while " * 10_000, end="", flush=True)
    print(flush=True)
    (OUT / "checkpoints").mkdir(parents=True, exist_ok=True)
    log("epoch_start", epoch_num=1)
    log("eval_request", epoch_num=1, checkpoint="checkpoints/1.pt\x00../../etc/passwd")
    header = {"descr": "<i8", "fortran_order": False, "shape": (10**12,)}  # 8 TB claimed
    with open(OUT / "checkpoints" / "huge.npy", "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, header)
        fh.write(b"\0" * 64)
    log("eval_request", epoch_num=2, checkpoint="checkpoints/huge.npy")
    evaluate()


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
    elif mode == "nap":
        log("epoch_start", epoch_num=1)
        time.sleep(4)
        evaluate()
    elif mode == "cross":
        cross()
    elif mode == "twice":  # two evaluations 3 s apart (tiny.build_with_heartbeat)
        import torch

        from tiny import build

        (OUT / "checkpoints").mkdir(parents=True, exist_ok=True)
        for epoch in (1, 2):
            torch.save(build().state_dict(), OUT / "checkpoints" / f"{epoch}.pt")
            log("eval_request", epoch_num=epoch, checkpoint=f"checkpoints/{epoch}.pt")
            if epoch == 1:  # 3 s of work: a sleep would run on through the frozen window
                spent = time.process_time()
                while time.process_time() - spent < 3:
                    pass
    elif mode == "fill":
        log("epoch_start", epoch_num=1)
        block = b"\0" * (1 << 20)
        with open(OUT / "fill.bin", "wb") as fh:
            for _ in range(4096):  # up to 4 GiB, a MiB at a time, slowly enough to be stopped
                fh.write(block)
                fh.flush()
                time.sleep(0.01)
        evaluate()
    elif mode == "hostile":
        hostile()
    log("run_stop", status="success")


if __name__ == "__main__":
    main(sys.argv[1])
