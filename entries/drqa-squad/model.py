"""DrQA's document reader (Chen, Fisch, Weston and Bordes, "Reading Wikipedia to Answer
Open-Domain Questions", ACL 2017, section 3.2) for SQuAD v1.1, written for the runner's
question-answering contract (docs/run-contract.md, "Question answering (SQuAD)").

The architecture is the paper's, at the sizes of hitvoice/DrQA (DAWNBench's
dawn_drqa_1p100-ec2):

* words: 300-d GloVe 840B vectors, kept fixed except the 1,000 most frequent question
  words, which are fine-tuned (the paper's recipe);
* each context token p_i is the concatenation of
  - its word vector E(p_i),
  - exact match: p_i occurs in the question as is, and lower-cased,
  - term frequency: how often p_i (lower-cased) occurs in the context / context length,
  - aligned question embedding: sum_j a_ij E(q_j), a_ij = softmax_j(relu(W E(p_i)) . relu(W E(q_j)));
  the paper's POS, NER and lemma features are left out: they come from spaCy, which the
  image does not carry (the paper's ablation loses under 1 F1 without all its token
  features, term frequency included, which is kept here);
* a 3-layer BiLSTM (hidden 128) over the context and another over the question, each
  layer's input through dropout 0.4, the output the concatenation of all layers (768-d);
* the question vector q = sum_j b_j q_j, b_j = softmax_j(w . q_j) (self-attention);
* start and end scores p_i W_s q and p_i W_e q (bilinear); the runner decodes the best span
  of at most 15 tokens.

What the runner requires of the model, and how it is met:

* The evaluator rebuilds the model with ``build_model()`` (no arguments, no files) and loads
  each checkpoint strictly, so every shape is fixed here: the word table has a fixed
  capacity (``VOCAB`` rows) and the vocabulary itself is a tensor of the checkpoint: the
  sorted 63-bit hashes of its words (``words.vocab``, padded with ``SENTINEL``). ``encode``
  turns each token into its hash (integers, as the contract requires) and the forward pass
  finds its row with ``torch.searchsorted``; a word outside the vocabulary gets a zero
  vector (DrQA's unknown word). No vocabulary file ships with the entry.
* Every number the forward pass computes with is a tensor of the checkpoint, so a
  checkpoint whose tensors are permuted falls to chance (its hash table no longer sorted).
  The fixed word vectors are a buffer stored in fp16: 78.6 MB a checkpoint instead of
  157 MB (eleven checkpoints stay well under /output's 2 GiB), at a relative rounding error
  under 0.05 %, far below the 0.4 dropout the reader trains with (not measured on SQuAD).
* The LSTMs read packed sequences, so a question's scores do not depend on the other
  questions of its batch: the evaluator's batches and the batch-1 timed pass agree
  (hitvoice ran unpacked, padded batches for speed).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from functools import lru_cache

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

# --- Sizes (the builder's; a smoke run builds the same model) --------------------------------
VOCAB = 2 ** 17          # rows of the word table: the training set's GloVe words, then GloVe's most frequent
TUNED = 1000             # the most frequent question words, whose vectors are fine-tuned
DIM = 300                # GloVe 840B's dimension
HIDDEN = 128
LAYERS = 3
DROPOUT = 0.4
FEATURES = 3             # exact match (as is, lower-cased), term frequency
MAX_ANSWER_TOKENS = 15

SENTINEL = 2 ** 63 - 1   # pads the sorted hash tables; no word hashes to it
PAD = -1                 # the hash of a padding position: matches no word
MASKED = -1e30           # the score of a position that is not a context token

# --- Tokens and their hashes -----------------------------------------------------------------
TOKEN = re.compile(r"\w+|[^\w\s]")


def tokens(text: str) -> list[tuple[str, int, int]]:
    """(word, start, end) of each token: runs of word characters, and single other characters."""
    return [(m.group(), m.start(), m.end()) for m in TOKEN.finditer(text)]


@lru_cache(maxsize=1 << 18)
def word_hash(word: str) -> int:
    """A word's 63-bit hash (stable across processes, unlike Python's ``hash``)."""
    digest = hashlib.blake2b(word.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little") % SENTINEL


# --- Features: integers only (the model's numbers come from its checkpoint) ------------------
def prepare_context(context: str) -> dict:
    """What every question on one context shares: its tokens, their hashes and term counts."""
    toks = tokens(context)
    lower = [w.lower() for w, _, _ in toks]
    counts = Counter(lower)
    return {"words": [w for w, _, _ in toks], "lower": lower,
            "hashes": [word_hash(w) for w, _, _ in toks],
            "term_count": [counts[w] for w in lower],
            "offsets": [(a, b) for _, a, b in toks]}


def featurize(prepared: dict, question: str) -> dict:
    """One question's inputs: its context's (``prepare_context``) plus the exact-match flags
    and the question's own word hashes."""
    q_words = [w for w, _, _ in tokens(question)]
    as_is, lowered = set(q_words), {w.lower() for w in q_words}
    return {"context": prepared["hashes"],
            "match_cased": [int(w in as_is) for w in prepared["words"]],
            "match_lower": [int(w in lowered) for w in prepared["lower"]],
            "term_count": prepared["term_count"],
            "offsets": prepared["offsets"],
            "question": [word_hash(w) for w in q_words]}


def collate(items: list[dict]) -> dict[str, torch.Tensor]:
    """Pad a list of ``featurize`` outputs into the batch ``forward`` takes."""
    n = len(items)
    t = max(1, max(len(it["context"]) for it in items))
    m = max(1, max(len(it["question"]) for it in items))
    batch = {"context": torch.full((n, t), PAD, dtype=torch.long),
             "match_cased": torch.zeros(n, t, dtype=torch.long),
             "match_lower": torch.zeros(n, t, dtype=torch.long),
             "term_count": torch.zeros(n, t, dtype=torch.long),
             "offsets": torch.full((n, t, 2), -1, dtype=torch.long),
             "question": torch.full((n, m), PAD, dtype=torch.long)}
    for i, it in enumerate(items):
        k = len(it["context"])
        if k:
            for key in ("context", "match_cased", "match_lower", "term_count"):
                batch[key][i, :k] = torch.tensor(it[key], dtype=torch.long)
            batch["offsets"][i, :k] = torch.tensor(it["offsets"], dtype=torch.long)
        if it["question"]:
            batch["question"][i, :len(it["question"])] = torch.tensor(it["question"], dtype=torch.long)
    return batch


# --- The word table --------------------------------------------------------------------------
class WordTable(nn.Module):
    """Word vectors looked up by hash: ``vocab`` holds the vocabulary's hashes in sorted order
    (then ``SENTINEL``), ``vectors`` their fixed GloVe vectors (fp16); the fine-tuned words
    have their own small table (``tuned_vocab``, ``tuned``) that overrides the fixed one."""

    def __init__(self):
        super().__init__()
        self.register_buffer("vocab", torch.full((VOCAB,), SENTINEL, dtype=torch.long))
        self.register_buffer("vectors", torch.zeros(VOCAB, DIM, dtype=torch.float16))
        self.register_buffer("tuned_vocab", torch.full((TUNED,), SENTINEL, dtype=torch.long))
        self.tuned = nn.Parameter(torch.zeros(TUNED, DIM))

    @torch.no_grad()
    def fill(self, words: list[str], vectors: torch.Tensor, tuned: list[str]) -> None:
        """Set the vocabulary (at most ``VOCAB`` words, each with its vector) and the words to
        fine-tune (at most ``TUNED``, among ``words``; they start from their fixed vectors)."""
        hashes = torch.tensor([word_hash(w) for w in words[:VOCAB]], dtype=torch.long)
        hashes, order = torch.sort(hashes)
        keep = torch.ones_like(hashes, dtype=torch.bool)
        keep[1:] = hashes[1:] != hashes[:-1]  # a hash collision keeps one of the two words
        hashes, order = hashes[keep], order[keep]
        self.vocab.fill_(SENTINEL)
        self.vectors.zero_()
        self.vocab[:len(hashes)] = hashes
        self.vectors[:len(hashes)] = vectors[order].to(self.vectors)
        t = torch.tensor(sorted({word_hash(w) for w in tuned[:TUNED]}), dtype=torch.long)
        self.tuned_vocab.fill_(SENTINEL)
        self.tuned_vocab[:len(t)] = t
        self.tuned.zero_()
        self.tuned[:len(t)] = self.lookup_fixed(t.to(self.vocab.device)).to(self.tuned)

    def lookup_fixed(self, hashes: torch.Tensor) -> torch.Tensor:
        row = torch.searchsorted(self.vocab, hashes).clamp_(max=VOCAB - 1)
        found = (self.vocab[row] == hashes).unsqueeze(-1)
        return self.vectors[row].float() * found

    def forward(self, hashes: torch.Tensor) -> torch.Tensor:
        row = torch.searchsorted(self.tuned_vocab, hashes).clamp_(max=TUNED - 1)
        tuned = (self.tuned_vocab[row] == hashes).unsqueeze(-1)
        return torch.where(tuned, self.tuned[row], self.lookup_fixed(hashes))


# --- The encoders ----------------------------------------------------------------------------
class StackedBiLSTM(nn.Module):
    """DrQA's RNN encoder: ``layers`` BiLSTMs, each reading the previous one's output through
    dropout; returns every layer's output concatenated (``N x L x 2 * hidden * layers``)."""

    def __init__(self, input_size: int, hidden: int = HIDDEN, layers: int = LAYERS, dropout: float = DROPOUT):
        super().__init__()
        self.dropout = dropout
        self.rnns = nn.ModuleList(
            nn.LSTM(input_size if i == 0 else 2 * hidden, hidden, batch_first=True, bidirectional=True)
            for i in range(layers))

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        lengths = lengths.clamp(min=1).cpu()  # an empty text reads its one padding position
        outputs = []
        for rnn in self.rnns:
            x = F.dropout(x, self.dropout, self.training)
            packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
            x = pad_packed_sequence(rnn(packed)[0], batch_first=True, total_length=x.shape[1])[0]
            outputs.append(x)
        return F.dropout(torch.cat(outputs, dim=-1), self.dropout, self.training)


class DocumentReader(nn.Module):
    max_answer_tokens = MAX_ANSWER_TOKENS  # read by the runner's span decoding

    def __init__(self):
        super().__init__()
        self.words = WordTable()
        self.align = nn.Linear(DIM, DIM)  # W of the aligned question embedding
        self.context_rnn = StackedBiLSTM(DIM + DIM + FEATURES)
        self.question_rnn = StackedBiLSTM(DIM)
        width = 2 * HIDDEN * LAYERS
        self.question_attention = nn.Linear(width, 1)  # w of the question's self-attention
        self.start = nn.Linear(width, width)           # W_s
        self.end = nn.Linear(width, width)             # W_e

    def encode(self, contexts: list[str], questions: list[str]) -> dict[str, torch.Tensor]:
        """The run contract's tokenisation: integer tensors only, ``offsets`` included."""
        return collate([featurize(prepare_context(c), q) for c, q in zip(contexts, questions)])

    def forward(self, context, match_cased, match_lower, term_count, offsets, question):
        c_mask = offsets[..., 0] >= 0  # N x T: the context's tokens
        q_mask = question != PAD       # N x M
        c_len = c_mask.sum(1)
        c_emb = F.dropout(self.words(context), DROPOUT, self.training)
        q_emb = F.dropout(self.words(question), DROPOUT, self.training)

        # Aligned question embedding: each context token's attention over the question words.
        scores = torch.relu(self.align(c_emb)) @ torch.relu(self.align(q_emb)).transpose(1, 2)
        attention = scores.float().masked_fill(~q_mask.unsqueeze(1), MASKED).softmax(-1)
        aligned = attention.to(q_emb.dtype) @ q_emb

        tf = term_count.float() / c_len.clamp(min=1).unsqueeze(1).float()
        features = torch.stack([match_cased.float(), match_lower.float(), tf], dim=-1)
        p = self.context_rnn(torch.cat([c_emb, aligned.to(c_emb.dtype), features.to(c_emb.dtype)], -1), c_len)

        qh = self.question_rnn(q_emb, q_mask.sum(1))
        b = self.question_attention(qh).squeeze(-1).float().masked_fill(~q_mask, MASKED).softmax(-1)
        q = (b.unsqueeze(-1).to(qh.dtype) * qh).sum(1)  # N x 768

        start = (p @ self.start(q).unsqueeze(-1)).squeeze(-1).float()
        end = (p @ self.end(q).unsqueeze(-1)).squeeze(-1).float()
        return start.masked_fill(~c_mask, MASKED), end.masked_fill(~c_mask, MASKED)


def build_model() -> DocumentReader:
    """The untrained reader, the same on every call (its numbers are the checkpoint's anyway)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return DocumentReader()
