"""CoNLL-style column files (CoNLL-2003, WNUT-17, OntoNotes exports ...): one word per line,
the word in `token_column` (default the first), its tag in `label_column` (default the last).

  - columns are TAB-separated when the file's first word line holds a TAB (a token may then
    contain spaces), else separated by runs of whitespace;
  - a blank line (or one holding only whitespace: WNUT-17's train file breaks sentences with a
    lone TAB) ends a sentence;
  - `-DOCSTART-` lines are skipped, and so are comment lines: `#` followed by a space, or a bare
    `#` (`# sent_id = ...`). `#hashtag<TAB>O` is a word (tweets are full of them);
  - every word line of a file has the same number of columns: a ragged row, a column index
    outside the row, or a missing file is a DataError naming the file and line;
  - a split whose rows have one column only (the token) is unlabelled: predicted, not scored.

Gold tags are BIO-repaired as read (data/tagged.py), so an IOB1 file trains as IOB2.

    task=ner task.data.train=train.conll task.data.dev=dev.conll [task.data.test=test.conll]
"""

from __future__ import annotations

import re
from pathlib import Path

from lightning_modules.data.tagged import TaggedSentence, is_bio, repair_bio
from lightning_modules.data.task_data import Split, TaskData
from ptmlab.contracts import DataError
from ptmlab.methods.readers import ConllReaderParams

WHITESPACE = re.compile(r"\s+")


def is_comment(line: str) -> bool:
    return line == "#" or line.startswith("# ")


class ConllReader:
    declaration = ConllReaderParams

    def __init__(
        self,
        train: str,
        dev: str,
        test: str | None = None,
        token_column: int = 0,
        label_column: int = -1,
        repair: bool = True,
    ):
        self.files = {"train": train, "dev": dev, **({"test": test} if test else {})}
        self.token_column, self.label_column, self.repair = int(token_column), int(label_column), bool(repair)

    def read(self) -> TaskData:
        splits = {name: self.read_split(name, path) for name, path in self.files.items()}
        if not splits["train"].has_labels:
            raise DataError(
                f"{splits['train'].source}: the train split has no tag column "
                f"(one column per row; task.data.label_column={self.label_column})"
            )
        evals = [n for n in ("dev", "test") if n in splits and splits[n].has_labels]
        tests = [n for n in ("dev", "test") if n in splits and not splits[n].has_labels]
        return TaskData(splits=splits, eval_splits=evals, test_splits=tests)

    def read_split(self, name: str, path: str | Path) -> Split:
        path = Path(path)
        if not path.is_file():
            raise DataError(f"{path}: CoNLL file not found (task.data.{name})")
        sentences: list[TaggedSentence] = []
        rows: list[tuple[int, tuple[str, ...]]] = []
        width: tuple[int, int] | None = None  # (columns per row, the line that set it)
        tab: bool | None = None

        def finish() -> None:
            if rows:
                sentences.append(self._sentence(path, rows, len(sentences), width[0]))
            rows.clear()

        text = path.read_text(encoding="utf-8-sig")
        for lineno, line in enumerate(text.split("\n"), start=1):
            line = line.rstrip("\r")
            if not line.strip():
                finish()
                continue
            if is_comment(line) or line.split()[0] == "-DOCSTART-":
                continue
            if tab is None:
                tab = "\t" in line
            cols = tuple(line.split("\t")) if tab else tuple(WHITESPACE.split(line.strip()))
            if width is None:
                width = (len(cols), lineno)
            elif len(cols) != width[0]:
                raise DataError(
                    f"{path}: line {lineno} has {len(cols)} columns but line {width[1]} has "
                    f"{width[0]} (ragged CoNLL rows)"
                )
            rows.append((lineno, cols))
        finish()
        if not sentences:
            raise DataError(f"{path}: no sentences (task.data.{name})")
        return Split(name=name, examples=sentences, source=str(path), has_labels=width[0] > 1)

    def _column(self, path: Path, lineno: int, width: int, index: int, key: str) -> int:
        if not -width <= index < width:
            raise DataError(f"{path}: line {lineno} has {width} columns; task.data.{key}={index} is outside them")
        return index % width

    def _sentence(self, path: Path, rows: list[tuple[int, tuple[str, ...]]], index: int, width: int) -> TaggedSentence:
        first = rows[0][0]
        token = self._column(path, first, width, self.token_column, "token_column")
        tags = None
        if width > 1:
            label = self._column(path, first, width, self.label_column, "label_column")
            tags = [cols[label] for _, cols in rows]
            if self.repair and all(is_bio(t) for t in tags):
                tags = repair_bio(tags)
            tags = tuple(tags)
        return TaggedSentence(
            words=tuple(cols[token] for _, cols in rows),
            label=tags,
            row=first,
            id=str(index),
            lines=tuple(n for n, _ in rows),
            columns=tuple(cols for _, cols in rows),
        )
