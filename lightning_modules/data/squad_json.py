"""SQuAD JSON files (v1.1 and v2.0): `{"data": [{"title", "paragraphs": [{"context", "qas": [{"id",
"question", "answers": [{"text", "answer_start"}], "is_impossible"?}]}]}], "version"}`.

  - a file is v2.0 when its questions carry `is_impossible` (the key, whatever the `version` says);
    a v2.0 question with `is_impossible: true` has no gold answer (its `answers` are ignored; v2.0
    train files keep the would-be spans in `plausible_answers`, which are not read);
  - every gold answer is checked against its context: `context[answer_start:][:len(text)]` must be
    the text. A mismatch, a question without an id, text or (answerable) answer, a duplicate id,
    malformed JSON or a missing file is a DataError naming the file and the question id;
  - one `Question` per question, in file order; its `row` is its 1-based position in the file.

    task=squad task.data.train=train-v1.1.json task.data.dev=dev-v1.1.json
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from lightning_modules.data.task_data import Split, TaskData
from ptmlab.contracts import DataError
from ptmlab.methods.readers import SquadReaderParams


@dataclass(frozen=True)
class Answer:
    text: str
    start: int  # character offset in the context

    @property
    def end(self) -> int:
        return self.start + len(self.text)


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    context: str
    answers: tuple[Answer, ...]  # gold answers; () for a v2.0 question without one
    is_impossible: bool | None  # None: a v1.1 file
    title: str
    row: int

    @property
    def texts(self) -> tuple[str, str]:
        return self.question, self.context

    @property
    def label(self) -> tuple[Answer, ...]:
        return self.answers


def is_v2(split: Split) -> bool:
    """SQuAD v2.0 rules (no-answer questions, the no-answer threshold) apply to this split."""
    return any(q.is_impossible is not None for q in split.examples)


class SquadReader:
    declaration = SquadReaderParams

    def __init__(self, train: str, dev: str):
        self.files = {"train": train, "dev": dev}

    def read(self) -> TaskData:
        splits = {name: read_squad(name, path) for name, path in self.files.items()}
        return TaskData(splits=splits, eval_splits=["dev"])


def read_squad(name: str, path: str | Path) -> Split:
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: SQuAD file not found (task.data.{name})")
    try:
        doc = json.loads(path.read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), list):
        raise DataError(f'{path}: not a SQuAD file (no top-level "data" list)')
    questions: list[Question] = []
    seen: set[str] = set()
    for a, article in enumerate(doc["data"]):
        title = str(article.get("title", a)) if isinstance(article, dict) else str(a)
        for p, paragraph in enumerate(_field(path, article, "paragraphs", f"article {title}", list)):
            context = _field(path, paragraph, "context", f"article {title} paragraph {p}", str)
            for qa in _field(path, paragraph, "qas", f"article {title} paragraph {p}", list):
                questions.append(_question(path, qa, context, title, len(questions) + 1, seen))
    if not questions:
        raise DataError(f"{path}: no questions (task.data.{name})")
    return Split(name=name, examples=questions, source=str(path), has_labels=True)


def _field(path: Path, node, key: str, where: str, kind: type):
    value = node.get(key) if isinstance(node, dict) else None
    if not isinstance(value, kind):
        raise DataError(f'{path}: {where}: "{key}" is missing or not a {kind.__name__}')
    return value


def _question(path: Path, qa, context: str, title: str, row: int, seen: set[str]) -> Question:
    qid = qa.get("id") if isinstance(qa, dict) else None
    if not isinstance(qid, str) or not qid:
        raise DataError(f'{path}: question {row} of article {title} has no "id"')
    where = f"question {qid}"
    if qid in seen:
        raise DataError(f"{path}: {where}: the id appears twice")
    seen.add(qid)
    text = _field(path, qa, "question", where, str)
    impossible = qa.get("is_impossible")
    if impossible is not None and not isinstance(impossible, bool):
        raise DataError(f'{path}: {where}: "is_impossible" is {impossible!r}, not true or false')
    answers: tuple[Answer, ...] = ()
    if not impossible:
        answers = tuple(_answer(path, where, raw, context) for raw in _field(path, qa, "answers", where, list))
        if not answers:
            raise DataError(
                f"{path}: {where}: no gold answer"
                + (" and is_impossible is false" if impossible is False else " (a v1.1 question needs one)")
            )
    return Question(
        id=qid, question=text, context=context, answers=answers, is_impossible=impossible, title=title, row=row
    )


def _answer(path: Path, where: str, raw, context: str) -> Answer:
    text, start = (raw.get("text"), raw.get("answer_start")) if isinstance(raw, dict) else (None, None)
    if not isinstance(text, str) or not isinstance(start, int) or isinstance(start, bool):
        raise DataError(f'{path}: {where}: an answer needs a "text" string and an "answer_start" integer')
    found = context[start : start + len(text)] if 0 <= start else ""
    if found != text:
        raise DataError(
            f"{path}: {where}: answer {text!r} does not match the context at answer_start={start} ({found!r})"
        )
    return Answer(text, start)
