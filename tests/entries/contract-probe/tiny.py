"""An untrained linear classifier: something real for the runner's evaluator to load."""
import torch
from torch import nn


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(28 * 28, 10)

    def forward(self, x):
        return self.head(torch.flatten(x * (1 / 255.0), 1))


def build():
    torch.manual_seed(0)
    return Tiny()


def build_with_heartbeat():
    """The builder, plus a thread left running in the evaluator: it prints the host's time
    every 20 ms (the runner keeps the evaluator's output in logs/evaluator.log). The runner
    evaluates only after the training container exited, so no beat may fall while the
    entry runs."""
    import sys
    import threading
    import time

    def one_beat():
        # One write a line, as the harness writes its own: print() writes the text and the
        # newline apart, and a harness line written between them is no longer its own line.
        sys.stdout.write(f"heartbeat {time.time():.3f}\n")
        sys.stdout.flush()

    def beat():
        while True:
            one_beat()
            time.sleep(0.02)

    one_beat()  # every build beats at least once, however soon the evaluator is stopped
    if not any(t.name == "heartbeat" for t in threading.enumerate()):
        threading.Thread(target=beat, name="heartbeat", daemon=True).start()
    return build()
