"""The DrQA reference entry (entries/drqa-squad) without Docker: its model follows the run
contract's question-answering interface (integer-only ``encode`` with ``offsets``, N x T
start/end scores), its builder is deterministic and fixes every shape (the vocabulary is a
tensor of the checkpoint), its predictions come from the checkpoint (provenance, permuted
tensors), a batch's scores are each question's own, it learns, and a smoke run of its
train.py streams a GloVe file and reports the events the runner reads."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from runner.manifest import load_entry
from runner.run.init_weights import roles_for, write_init

REPO = Path(__file__).resolve().parents[1]
ENTRY = REPO / "entries" / "drqa-squad"
sys.path.insert(0, str(REPO / "runner"))
from harness.frameworks.pytorch import load  # noqa: E402 - the harness' own package name
from harness.provenance import Ledger  # noqa: E402

spec = importlib.util.spec_from_file_location("drqa_squad_model", ENTRY / "model.py")
drqa = importlib.util.module_from_spec(spec)
spec.loader.exec_module(drqa)

WORDS = ("river stone castle garden winter lantern harbor violet engine meadow falcon copper "
         "signal orchard canyon marble ribbon glacier timber beacon Which word follows ?").split()


def _filled_model(seed: int = 0):
    """A built model with a small vocabulary of random vectors (GloVe's stand-in)."""
    torch.manual_seed(seed)
    model = drqa.DocumentReader()
    vectors = torch.randn(len(WORDS), drqa.DIM) * 0.4
    model.words.fill(WORDS, vectors, ["Which", "word", "follows", "?"])
    return model


def _examples(n: int, seed: int = 0) -> list[tuple[str, str, int]]:
    """(context, question, answer token): the answer is the word after the question's cue,
    which occurs once in the context."""
    rng = np.random.default_rng(seed)
    pool = WORDS[:20]
    out = []
    for _ in range(n):
        words = [str(w) for w in rng.choice(pool, size=int(rng.integers(8, 16)))]
        k = int(rng.integers(1, len(words) - 1))
        cue = words[k - 1]
        words = [w if j == k - 1 or w != cue else "stone" if cue != "stone" else "river" for j, w in enumerate(words)]
        out.append((" ".join(words), f"Which word follows {cue} ?", k))
    return out


def test_encode_returns_integer_tensors_with_the_contracts_offsets():
    model = drqa.build_model()
    contexts = ["Denver Broncos won, 24-10.", "The Panthers"]
    batch = model.encode(contexts, ["Who won?", "Which team lost the game?"])
    assert "offsets" in batch
    for name, t in batch.items():
        assert isinstance(t, torch.Tensor) and not t.is_floating_point() and not t.is_complex(), name
    offsets = batch["offsets"]
    assert offsets.dtype == torch.int64 and offsets.shape == (2, 8, 2)
    spans = [contexts[0][a:b] for a, b in offsets[0].tolist()]
    assert spans == ["Denver", "Broncos", "won", ",", "24", "-", "10", "."]
    assert [contexts[1][a:b] for a, b in offsets[1, :2].tolist()] == ["The", "Panthers"]
    assert (offsets[1, 2:] == -1).all()  # padding
    assert batch["match_cased"][0].tolist() == [0, 0, 1, 0, 0, 0, 0, 0]  # "won" is in the question
    assert batch["match_lower"][1, 0].item() == 1 and batch["match_cased"][1, 0].item() == 0  # The / the
    assert model.max_answer_tokens == 15


def test_forward_gives_n_by_t_scores_with_only_context_tokens_open():
    model = _filled_model().eval()
    batch = model.encode(["river stone castle", "garden"], ["Which word follows river ?", "?"])
    with torch.no_grad():
        start, end = model(**batch)
    assert start.shape == end.shape == (2, 3) and start.dtype == torch.float32
    assert torch.isfinite(start[0]).all() and (start[1, 1:] < -1e29).all() and (end[1, 1:] < -1e29).all()
    # an empty context or question still gives scores of the right shape
    with torch.no_grad():
        start, end = model(**model.encode(["", "river"], ["", ""]))
    assert start.shape == (2, 1) and torch.isfinite(start).all()


def test_builder_is_deterministic_and_its_state_dict_holds_the_vocabulary():
    a, b = drqa.build_model().state_dict(), drqa.build_model().state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert a["words.vocab"].shape == (drqa.VOCAB,) and a["words.vocab"].dtype == torch.int64
    assert a["words.vectors"].shape == (drqa.VOCAB, drqa.DIM) and a["words.vectors"].dtype == torch.float16
    assert a["words.tuned"].shape == (drqa.TUNED, drqa.DIM)
    filled = _filled_model().state_dict()
    vocab = filled["words.vocab"]
    assert (vocab[:len(WORDS)] < drqa.SENTINEL).all() and (vocab[len(WORDS):] == drqa.SENTINEL).all()
    assert torch.equal(vocab, torch.sort(vocab).values)
    row = int(torch.searchsorted(vocab, torch.tensor(drqa.word_hash("castle"))))
    assert filled["words.vectors"][row].abs().sum() > 0


@pytest.fixture
def entry_import():
    """The harness imports the builder as the module ``model`` from the entry's folder: leave
    neither behind (other tests load other entries' ``model``)."""
    yield
    sys.modules.pop("model", None)
    while str(ENTRY) in sys.path:
        sys.path.remove(str(ENTRY))


def test_a_checkpoint_loads_strictly_into_the_builders_model_and_is_all_it_computes_with(tmp_path, entry_import):
    """The evaluator's own loader and provenance ledger (CPU): every tensor the forward pass
    reads is a tensor of the checkpoint; permuting the checkpoint's tensors changes the scores."""
    weights = tmp_path / "weights.pt"
    torch.save(_filled_model().state_dict(), weights)
    loaded = load(ENTRY, "model:build_model", weights)
    ledger = Ledger(loaded.checkpoint_tensors(), loaded.normalise)
    loaded.record_uses(ledger)
    contexts = [c for c, _, _ in _examples(6)]
    questions = [q for _, q, _ in _examples(6)]
    offsets, start, end = loaded.span_scores(contexts, questions)
    loaded.stop_recording()
    record = ledger.record()
    assert record["foreign_count"] == 0 and record["small_constants"]["count"] == 0, record
    assert start.shape == offsets.shape[:2]
    # every tensor of more than one number, integer ones (the vocabulary) too
    assert loaded.shuffle_weights(3) == sum(t.numel() > 1 for t in loaded.checkpoint.values())
    _, start2, end2 = loaded.span_scores(contexts, questions)
    context_tokens = offsets[..., 0] >= 0
    assert not np.allclose(start[context_tokens], start2[context_tokens], atol=1e-3)


def test_a_questions_scores_do_not_depend_on_its_batch():
    """Packed sequences: the evaluator's batches and the batch-1 timed pass agree."""
    model = _filled_model().eval()
    items = _examples(5, seed=1)
    with torch.no_grad():
        batch = model.encode([c for c, _, _ in items], [q for _, q, _ in items])
        start, end = model(**batch)
        for i, (c, q, _) in enumerate(items):
            s1, e1 = model(**model.encode([c], [q]))
            n = s1.shape[1]
            assert torch.allclose(start[i, :n], s1[0], atol=1e-4) and torch.allclose(end[i, :n], e1[0], atol=1e-4)


def test_a_short_cpu_training_run_lowers_the_loss():
    torch.set_num_threads(2)
    model = _filled_model(seed=1).train()
    items = _examples(64, seed=2)
    batch = model.encode([c for c, _, _ in items], [q for _, q, _ in items])
    target = torch.tensor([k for _, _, k in items])
    opt = torch.optim.Adamax([p for p in model.parameters() if p.requires_grad], lr=0.002)
    losses = []
    for step in range(10):
        idx = torch.arange(step % 4 * 16, step % 4 * 16 + 16)
        start, end = model(**{k: v[idx] for k, v in batch.items()})
        loss = F.cross_entropy(start, target[idx]) + F.cross_entropy(end, target[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert np.mean(losses[-3:]) < np.mean(losses[:3]) - 0.2, losses


def test_a_smoke_run_streams_glove_and_reports_checkpoints(tmp_path):
    data = tmp_path / "data"
    (data / "train").mkdir(parents=True)
    paragraphs = [{"context": c, "qas": [{"id": str(i), "question": q, "answers": [
        {"answer_start": len(" ".join(c.split()[:k])) + 1, "text": c.split()[k]}]}]}
        for i, (c, q, k) in enumerate(_examples(40))]
    (data / "train" / "train-v1.1.json").write_text(json.dumps({"data": [{"title": "t", "paragraphs": paragraphs}]}))
    glove = data / "public" / "glove.840B.300d"
    glove.mkdir(parents=True)
    rng = np.random.default_rng(0)
    with open(glove / "glove.840B.300d.txt", "w") as fh:
        for word in ["at a", "unused"] + WORDS:  # 840B has a few words with spaces in them
            fh.write(word + " " + " ".join(f"{x:.4f}" for x in rng.normal(0, 0.4, drqa.DIM)) + "\n")
    out = tmp_path / "output"
    # The runner's draw of the reader's start (the word table is the public input's, not drawn)
    listed = [(n, tuple(t.shape)) for n, t in drqa.build_model().state_dict().items() if t.is_floating_point()]
    write_init(tmp_path / "init", roles_for(listed, "pytorch", load_entry(ENTRY).initial_weights, True, 300), 5,
               "pytorch")
    env = {**os.environ, "RUNNER_DATA": str(data), "RUNNER_OUTPUT": str(out), "RUNNER_SEED": "5",
           "RUNNER_THREADS": "2", "RUNNER_SMOKE": "1", "RUNNER_INIT": str(tmp_path / "init")}
    run = subprocess.run([sys.executable, str(ENTRY / "train.py")], env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    events = [json.loads(line.removeprefix(":::MLLOG ")) for line in run.stdout.splitlines()
              if line.startswith(":::MLLOG ")]
    keys = [e["key"] for e in events]
    assert keys[0] == "run_start" and keys[-1] == "run_stop" and "seed" in keys
    (request,) = [e for e in events if e["key"] == "eval_request"]
    assert request["metadata"] == {"epoch_num": 1, "checkpoint": "checkpoints/epoch_1.pt"}
    assert re.search(r"vocabulary: (\d+) words \((\d+) of the training set.s \2 in GloVe\)", run.stderr), run.stderr
    state = torch.load(out / "model" / "weights.pt", weights_only=True)
    assert (out / "checkpoints" / "epoch_1.pt").is_file()
    model = drqa.build_model()
    model.load_state_dict(state, strict=True)
    assert model.words.lookup_fixed(torch.tensor([drqa.word_hash("castle")])).abs().sum() > 0
    assert model.words.lookup_fixed(torch.tensor([drqa.word_hash("unused")])).abs().sum() > 0  # GloVe's fill
    assert model.words.lookup_fixed(torch.tensor([drqa.word_hash("at a")])).abs().sum() == 0
