"""SQuAD v1.1 from the official ``dev-v1.1.json`` (and optionally ``train-v1.1.json``),
checked by the md5s torchtext lists, the ``version`` field and the question counts.

The evaluation questions go to ``eval/examples.jsonl`` without answers; the answers stay
on the host in ``labels/answers.json``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from runner.errors import UserError
from runner.events import bounded_json
from runner.staging.checks import Expected, check_count, check_file, file_digest
from runner.staging.stage import Stage

DEV = "dev-v1.1.json"
TRAIN = "train-v1.1.json"
VERSION = "1.1"
OFFICIAL = Expected(
    digests={
        DEV: ("md5", "3e85deb501d4e538b6bc56f786231552"),
        TRAIN: ("md5", "981b29407e0affa3b1b156f72073b945"),
    },
    counts={"eval": 10_570, "train": 87_599},
)
FIX = "download the official SQuAD v1.1 files again (https://rajpurkar.github.io/SQuAD-explorer/)"


def read_questions(path: Path) -> list[dict]:
    """Every question of a SQuAD v1.1 file: id, title, context, question, answers."""
    try:  # bounded: a hostile file's depth, huge integers or NaN are one line, not a traceback
        doc = bounded_json(path.read_text(encoding="utf-8"))
    except ValueError as err:  # JSONDecodeError, UnicodeDecodeError and the limits alike
        what = "not valid JSON" if isinstance(err, (json.JSONDecodeError, UnicodeDecodeError)) else "refused"
        raise UserError(f"{path} is {what} ({err})", FIX) from None
    if not isinstance(doc, dict) or doc.get("version") != VERSION:
        version = doc.get("version") if isinstance(doc, dict) else None
        raise UserError(f"{path} is not SQuAD v{VERSION} (version field is {version!r})", FIX)
    questions, seen = [], set()
    articles = doc.get("data")
    if not isinstance(articles, list):
        raise UserError(f"{path} does not have SQuAD's data/paragraphs/qas layout (no 'data' list)", FIX)
    for a, article in enumerate(articles):
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            raise UserError(f"{path}: article {a} has no 'paragraphs' list", FIX)
        for p, paragraph in enumerate(paragraphs):
            where = f"article {a} ({str(article.get('title'))[:60]!r}) paragraph {p}"
            context = paragraph.get("context") if isinstance(paragraph, dict) else None
            qas = paragraph.get("qas") if isinstance(paragraph, dict) else None
            if not isinstance(context, str) or not isinstance(qas, list):
                raise UserError(f"{path}: {where} needs a 'context' string and a 'qas' list", FIX)
            for q, qa in enumerate(qas):
                if problem := _question_problem(qa):
                    qid = qa.get("id") if isinstance(qa, dict) else None
                    raise UserError(f"{path}: {where} question {q} (id {qid!r}) {problem}", FIX)
                if qa["id"] in seen:
                    raise UserError(f"{path} repeats question id {qa['id']}", FIX)
                seen.add(qa["id"])
                questions.append(
                    {
                        "id": qa["id"],
                        "title": str(article.get("title", "")),
                        "context": context,
                        "question": qa["question"],
                        "answers": [a["text"] for a in qa["answers"]],
                    }
                )
    return questions


def _question_problem(qa) -> str | None:
    """What makes one entry of a paragraph's ``qas`` unusable; None when it is a question."""
    if not isinstance(qa, dict):
        return "is not an object"
    if not isinstance(qa.get("id"), str) or not qa["id"]:
        return "has no 'id' string"
    if not isinstance(qa.get("question"), str) or not qa["question"].strip():
        return "has no 'question' text"
    answers = qa.get("answers")
    if not isinstance(answers, list) or not answers:
        return "has no 'answers' (SQuAD v1.1 gives every question at least one)"
    if not all(isinstance(x, dict) and isinstance(x.get("text"), str) for x in answers):
        return "has an answer without a 'text' string"
    return None


def _find(path: Path, train: Path | None) -> tuple[Path, Path | None]:
    if path.is_dir():
        dev = path / DEV
        train = train or (path / TRAIN if (path / TRAIN).is_file() else None)
    else:
        dev = path
    if not dev.is_file():
        raise UserError(f"{dev} does not exist", f"pass the path of {DEV} (or of a folder holding it)")
    if train is not None and not train.is_file():
        raise UserError(f"{train} does not exist", f"pass the path of {TRAIN}, or leave it out")
    return dev, train


def import_files(
    path: Path, target: Path, *, train: Path | None = None, expected: Expected = OFFICIAL
) -> None:
    dev, train = _find(Path(path), Path(train) if train else None)
    seen = check_file(dev, expected, name=DEV, fix=FIX)
    source_digest = f"md5:{seen}" if seen else f"sha256:{file_digest(dev)}"
    questions = read_questions(dev)
    check_count("eval", len(questions), expected, what=f"SQuAD file {dev.name}", fix=FIX)
    train_count = None
    if train is not None:
        check_file(train, expected, name=TRAIN, fix=FIX)
        train_count = len(read_questions(train))
        check_count("train", train_count, expected, what=f"SQuAD file {train.name}", fix=FIX)
    with Stage(
        "squad-v1.1",
        target,
        source=f"file:{dev.name}" + (f"+{train.name}" if train else ""),
        source_digest=source_digest,
        conforming=expected.official,
    ) as stage:
        examples = "".join(
            json.dumps(
                {k: q[k] for k in ("id", "title", "context", "question")},
                ensure_ascii=False,
                sort_keys=True,
            )
            + "\n"
            for q in questions
        )
        stage.write_text("eval/examples.jsonl", examples)
        answers = {q["id"]: q["answers"] for q in questions}
        stage.write_text(
            "labels/answers.json",
            json.dumps(answers, ensure_ascii=False, sort_keys=True, indent=0) + "\n",
        )
        if train is not None:
            shutil.copyfile(train, stage.path(f"train/{TRAIN}"))
        stage.counts = {
            "eval": len(questions),
            **({"train": train_count} if train_count is not None else {}),
        }
