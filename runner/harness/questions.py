"""Question answering (SQuAD) in the harness: the evaluator's batched answers and the
batch-1 timed pass, for tasks whose inputs are questions (run contract, "Question answering").

The evaluation inputs are ``examples.jsonl`` (one ``{"id", "title", "context", "question"}``
a line; the answers stay on the host). The model turns texts into integer tensors
(``encode``) and scores every token as an answer's start and end (its forward pass); the
harness, not the model, picks the best span (start <= end, at most ``max_answer_tokens``
tokens, both ends inside the context) and answers with the context's characters between
them. An answer is therefore always a span of the given context.
"""

from __future__ import annotations

import gc
import json
import time
from pathlib import Path

import numpy as np

from . import mllog
from .errors import HarnessError
from .timing import progress

EXAMPLES = "examples.jsonl"
MAX_ANSWER_TOKENS = 15  # DrQA's and BiDAF's decoding limit
BATCH = 64
MAX_EXAMPLES_BYTES = 256 << 20


def read_examples(folder: Path) -> list[dict]:
    path = Path(folder) / EXAMPLES
    if not path.is_file():
        raise HarnessError(f"no evaluation questions at {path}")
    if path.stat().st_size > MAX_EXAMPLES_BYTES:
        raise HarnessError(f"{path} is over {MAX_EXAMPLES_BYTES} bytes")
    examples = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            ex = json.loads(line)
            examples.append({"id": str(ex["id"]), "context": str(ex["context"]), "question": str(ex["question"])})
        except (ValueError, KeyError, TypeError) as exc:
            raise HarnessError(f"{path} line {n} is not a question ({exc})") from None
    return examples


def best_span(offsets: np.ndarray, start: np.ndarray, end: np.ndarray, max_tokens: int) -> tuple[int, int] | None:
    """The (start, end) character span of the best-scoring token span of one item; None when
    the item has no context token. Ties go to the earliest span."""
    valid = (offsets[:, 0] >= 0) & (offsets[:, 1] >= offsets[:, 0])
    idx = np.flatnonzero(valid)
    if not len(idx):
        return None
    s, e = start[idx].astype(np.float64), end[idx].astype(np.float64)
    scores = s[:, None] + e[None, :]
    i, j = np.indices(scores.shape)
    scores[(j < i) | (idx[j] - idx[i] >= max_tokens)] = -np.inf
    best = int(np.argmax(scores))
    a, b = divmod(best, len(idx))
    return int(offsets[idx[a], 0]), int(offsets[idx[b], 1])


def decode(contexts: list[str], offsets: np.ndarray, start: np.ndarray, end: np.ndarray,
           max_tokens: int) -> list[str]:
    if offsets.ndim != 3 or offsets.shape[2] != 2 or start.shape != offsets.shape[:2] or end.shape != start.shape:
        raise HarnessError(f"span scores of shapes {start.shape}/{end.shape} do not fit offsets {offsets.shape} "
                           "(expected N x T scores and N x T x 2 offsets)")
    answers = []
    for k, context in enumerate(contexts):
        span = best_span(offsets[k], start[k], end[k], max_tokens)
        answers.append("" if span is None else context[max(0, span[0]):max(0, span[1])])
    return answers


def max_tokens(loaded) -> int:
    value = getattr(loaded.native, "max_answer_tokens", MAX_ANSWER_TOKENS)
    return value if isinstance(value, int) and 1 <= value <= 64 else MAX_ANSWER_TOKENS


def answer(loaded, examples: list[dict], batch: int = BATCH) -> dict[str, str]:
    """``{question id: answer}`` for every example, in batches."""
    out: dict[str, str] = {}
    limit = max_tokens(loaded)
    for i in range(0, len(examples), batch):
        chunk = examples[i:i + batch]
        contexts = [ex["context"] for ex in chunk]
        offsets, start, end = loaded.span_scores(contexts, [ex["question"] for ex in chunk])
        for ex, text in zip(chunk, decode(contexts, offsets, start, end, limit)):
            out[ex["id"]] = text
    return out


def write_answers(path: Path, answers: dict[str, str]) -> None:
    path.write_text(json.dumps(answers, ensure_ascii=False, sort_keys=True))


def timed_pass(loaded, examples: list[dict], *, warmup: int, backend: str):
    """DAWNBench's batch-1 latency for questions: one question at a time, every one, each
    timed from its texts to its answer string (tokenising, the forward pass, decoding)."""
    limit = max_tokens(loaded)

    def one(ex: dict) -> str:
        offsets, start, end = loaded.span_scores([ex["context"]], [ex["question"]])
        return decode([ex["context"]], offsets, start, end, limit)[0]

    t = time.perf_counter()
    for i in range(warmup):
        one(examples[i % len(examples)])
    warmup_seconds = time.perf_counter() - t
    n = len(examples)
    answers: dict[str, str] = {}
    latencies = np.zeros(n, dtype=np.int64)
    clock = time.perf_counter_ns
    gc.collect()
    gc.disable()
    try:
        mllog.emit("infer_start", event_type="INTERVAL_START", backend=backend, count=n)
        window_start = clock()
        for i, ex in enumerate(examples):
            t0 = clock()
            text = one(ex)
            t1 = clock()
            answers[ex["id"]] = text
            latencies[i] = t1 - t0
            progress(backend, i + 1, n)
        window_ns = clock() - window_start
        mllog.emit("infer_stop", event_type="INTERVAL_END", backend=backend, count=n)
    finally:
        gc.enable()
    return answers, latencies, warmup_seconds, window_ns
