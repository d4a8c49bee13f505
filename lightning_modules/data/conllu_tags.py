"""CoNLL-U treebanks as a token-classification task: one UD column is each word's label, so UPOS
(or XPOS, or the dependency relation) tagging is a downstream task. Read with data/conllu.py (the
format's rules: comments, multiword tokens and empty nodes skipped, malformed lines a DataError
naming file and line).

    task=upos task.data.train=<train.conllu> task.data.dev=<dev.conllu> task.data.label_column=xpos
"""

from __future__ import annotations

from pathlib import Path

from lightning_modules.data.conllu import ConlluSentence, read_conllu
from lightning_modules.data.tagged import TaggedSentence
from lightning_modules.data.task_data import Split, TaskData
from ptmlab.contracts import ConfigError, DataError
from ptmlab.methods.readers import ConlluTagReaderParams

UD_COLUMNS = {"upos": "upos", "xpos": "xpos", "deprel": "deprels"}  # label_column -> ConlluSentence field


class ConlluTagReader:
    declaration = ConlluTagReaderParams

    def __init__(
        self,
        train: str,
        dev: str,
        test: str | None = None,
        label_column: str = "upos",
        max_sentences: int | None = None,
    ):
        if label_column not in UD_COLUMNS:
            raise ConfigError(
                f"task.data.label_column={label_column} is not a CoNLL-U label column; valid: {', '.join(UD_COLUMNS)}"
            )
        self.files = {"train": train, "dev": dev, **({"test": test} if test else {})}
        self.label_column, self.max_sentences = label_column, max_sentences

    def read(self) -> TaskData:
        splits = {name: self.read_split(name, path) for name, path in self.files.items()}
        return TaskData(splits=splits, eval_splits=[n for n in ("dev", "test") if n in splits])

    def read_split(self, name: str, path: str | Path) -> Split:
        if not Path(path).is_file():
            raise DataError(f"{path}: CoNLL-U file not found (task.data.{name})")
        bank = read_conllu(path, self.max_sentences)
        if not bank.sentences:
            raise DataError(f"{path}: no sentences (task.data.{name})")
        examples = [self._sentence(s, i) for i, s in enumerate(bank.sentences)]
        return Split(name=name, examples=examples, source=str(path), has_labels=True)

    def _sentence(self, s: ConlluSentence, index: int) -> TaggedSentence:
        tags = tuple(getattr(s, UD_COLUMNS[self.label_column]))
        # The word lines as CoNLL-U columns again (LEMMA, DEPS, MISC are not kept by the reader).
        columns = tuple(
            (
                str(i + 1),
                s.words[i],
                "_",
                s.upos[i],
                s.xpos[i],
                "|".join(f"{k}={v}" for k, v in s.feats[i].items()) or "_",
                "_" if s.heads[i] < 0 else str(s.heads[i]),
                s.deprels[i],
                "_",
                "_",
            )
            for i in range(len(s))
        )
        # Word i's line counts from the sentence's first word line (multiword token lines not counted).
        return TaggedSentence(
            words=tuple(s.words),
            label=tags,
            row=s.line,
            id=s.sent_id or str(index),
            lines=tuple(s.line + i for i in range(len(s))),
            columns=columns,
        )
