"""SQuAD v1.1 from the official ``dev-v1.1.json`` (and optionally ``train-v1.1.json``),
checked by the md5s torchtext lists, the ``version`` field and the question counts.

The evaluation questions go to ``eval/examples.jsonl`` without answers; the answers stay
on the host in ``labels/answers.json``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from runner.data.checks import Expected, check_count, check_file, file_digest
from runner.data.staging import Stage
from runner.errors import UserError

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
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise UserError(f"{path} is not valid JSON ({err})", FIX) from None
    if not isinstance(doc, dict) or doc.get("version") != VERSION:
        version = doc.get("version") if isinstance(doc, dict) else None
        raise UserError(f"{path} is not SQuAD v{VERSION} (version field is {version!r})", FIX)
    questions, seen = [], set()
    try:
        for article in doc["data"]:
            for paragraph in article["paragraphs"]:
                for qa in paragraph["qas"]:
                    if qa["id"] in seen:
                        raise UserError(f"{path} repeats question id {qa['id']}", FIX)
                    seen.add(qa["id"])
                    questions.append(
                        {
                            "id": qa["id"],
                            "title": article["title"],
                            "context": paragraph["context"],
                            "question": qa["question"],
                            "answers": [a["text"] for a in qa["answers"]],
                        }
                    )
    except (KeyError, TypeError) as err:
        raise UserError(
            f"{path} does not have SQuAD's data/paragraphs/qas layout (missing {err})", FIX
        ) from None
    return questions


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
