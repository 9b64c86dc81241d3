"""A small DrQA-style reader for SQuAD (the DAWNBench DrQA/BiDAF entries' shape, scaled down
so a smoke run trains in seconds on two CPU cores).

DrQA (Chen et al., 2017) encodes each context token from its word vector plus an exact-match
feature (does the token occur in the question), scores every token as the answer's start and
end against a question summary, and decodes the best span of at most 15 tokens. Here: hashed
word embeddings (no vocabulary to ship; an entry with GloVe would initialise them from
/data/public/glove.840B.300d), a width-5 convolution instead of the BiLSTM, and a bilinear
start/end scorer. The runner's contract for question answering (docs/run-contract.md):
``encode`` turns texts into integer tensors with each token's character span (``offsets``),
``forward`` returns start and end scores, and the runner picks the span.
"""
import re
import zlib

import torch
import torch.nn as nn

TOKEN = re.compile(r"\w+|[^\w\s]")
BUCKETS = 4096


def tokens(text):
    return [(m.group(), m.start(), m.end()) for m in TOKEN.finditer(text)]


def bucket(word):
    return 1 + zlib.crc32(word.lower().encode()) % (BUCKETS - 1)


class Reader(nn.Module):
    max_answer_tokens = 15

    def __init__(self, dim=32, hidden=64):
        super().__init__()
        self.embed = nn.Embedding(BUCKETS, dim, padding_idx=0)
        self.encoder = nn.Conv1d(dim + 1, hidden, kernel_size=5, padding=2)
        self.question = nn.Linear(dim, 2 * hidden)
        self.bias = nn.Linear(hidden, 2)

    def encode(self, contexts, questions):
        """Integer tensors only: token buckets, the exact-match feature, character offsets."""
        ctx = [tokens(c) for c in contexts]
        qs = [tokens(q) for q in questions]
        t, m = max(1, max(len(c) for c in ctx)), max(1, max(len(q) for q in qs))
        ids = torch.zeros(len(ctx), t, dtype=torch.long)
        match = torch.zeros(len(ctx), t, dtype=torch.long)
        offsets = torch.full((len(ctx), t, 2), -1, dtype=torch.long)
        q_ids = torch.zeros(len(qs), m, dtype=torch.long)
        for i, (c, q) in enumerate(zip(ctx, qs)):
            words = {w.lower() for w, _, _ in q}
            for j, (w, a, b) in enumerate(c):
                ids[i, j], match[i, j] = bucket(w), int(w.lower() in words)
                offsets[i, j, 0], offsets[i, j, 1] = a, b
            for j, (w, _, _) in enumerate(q):
                q_ids[i, j] = bucket(w)
        return {"context": ids, "match": match, "question": q_ids, "offsets": offsets}

    def forward(self, context, match, question, offsets):
        x = torch.cat([self.embed(context), match.unsqueeze(-1).float()], dim=-1)
        h = torch.relu(self.encoder(x.transpose(1, 2))).transpose(1, 2)  # N x T x H
        q_mask = (question > 0).float().unsqueeze(-1)
        q = (self.embed(question) * q_mask).sum(1) / q_mask.sum(1).clamp(min=1.0)
        ws, we = self.question(q).chunk(2, dim=-1)  # N x H each
        b = self.bias(h)
        start = (h * ws.unsqueeze(1)).sum(-1) + b[..., 0]
        end = (h * we.unsqueeze(1)).sum(-1) + b[..., 1]
        pad = offsets[..., 0] < 0
        return start.masked_fill(pad, -1e4), end.masked_fill(pad, -1e4)


def build_model():
    return Reader()
