"""Train the small reader (model.py) on SQuAD v1.1's training file and ask the runner to
evaluate after every epoch; the runner's evaluator answers the dev questions itself.

Reads ${RUNNER_DATA}/train/train-v1.1.json (staged by `runner data import squad-v1.1`, or the
smoke run's synthetic stand-in). Public word vectors, when the task's declared public inputs
are mounted, would be at /data/public/<name>; this small reader does not need them.
"""
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

from model import build_model, tokens


def log(key, value=None, event_type="POINT_IN_TIME", **metadata):
    event = dict(namespace="", time_ms=int(time.time() * 1000), event_type=event_type,
                 key=key, value=value, metadata=metadata)
    print(":::MLLOG " + json.dumps(event), flush=True)


log("run_start", event_type="INTERVAL_START")
DATA = os.environ.get("RUNNER_DATA", "/data")
OUTPUT = os.environ.get("RUNNER_OUTPUT", "/output")
SEED = int(os.environ.get("RUNNER_SEED", "0"))
SMOKE = os.environ.get("RUNNER_SMOKE") == "1"
torch.set_num_threads(int(os.environ.get("RUNNER_THREADS", str(os.cpu_count()))))
torch.manual_seed(SEED)
EPOCHS, BATCH, LR = 3, 64, 1e-2
log("seed", SEED)
log("global_batch_size", BATCH)

# ---- data: (context, question, first answer's token span) --------------------------------
doc = json.load(open(f"{DATA}/train/train-v1.1.json", encoding="utf-8"))
examples = []
for article in doc["data"]:
    for para in article["paragraphs"]:
        toks = tokens(para["context"])
        for qa in para["qas"]:
            ans = qa["answers"][0]
            a, b = ans["answer_start"], ans["answer_start"] + len(ans["text"])
            inside = [j for j, (_, s, e) in enumerate(toks) if s < b and e > a]
            if inside:  # answers that are not whole-token spans are skipped, as DrQA does
                examples.append((para["context"], qa["question"], inside[0], inside[-1]))

model = build_model()
# Training starts from the weights the runner drew for this run (run contract, "Initial weights").
sys.path.insert(0, os.environ.get("RUNNER_INIT", "/init")); import runner_init  # noqa: E402,E702
runner_init.load(model)
opt = torch.optim.Adam(model.parameters(), lr=LR)


def request_evaluation(epoch):
    rel = f"checkpoints/epoch_{epoch}.pt"
    os.makedirs(f"{OUTPUT}/checkpoints", exist_ok=True)
    torch.save(model.state_dict(), f"{OUTPUT}/{rel}")
    log("eval_request", epoch_num=epoch, checkpoint=rel)


# Tokenised once, in fixed batches (shuffled by batch each epoch).
batches = []
for i in range(0, len(examples), BATCH):
    chunk = examples[i:i + BATCH]
    batches.append((model.encode([c for c, _, _, _ in chunk], [q for _, q, _, _ in chunk]),
                    torch.tensor([s for _, _, s, _ in chunk]), torch.tensor([e for _, _, _, e in chunk])))

for epoch in range(1, EPOCHS + 1):
    log("epoch_start", event_type="INTERVAL_START", epoch_num=epoch)
    model.train()
    for k in torch.randperm(len(batches)).tolist():
        batch, s_true, e_true = batches[k]
        start, end = model(**batch)
        loss = F.cross_entropy(start, s_true) + F.cross_entropy(end, e_true)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    log("epoch_stop", event_type="INTERVAL_END", epoch_num=epoch, loss=float(loss.detach()))
    request_evaluation(epoch)

os.makedirs(f"{OUTPUT}/model", exist_ok=True)
torch.save(model.state_dict(), f"{OUTPUT}/model/weights.pt")
log("run_stop", event_type="INTERVAL_END", status="success")
