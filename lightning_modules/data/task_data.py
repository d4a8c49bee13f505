"""What every downstream-task reader returns (GLUE, SentEval, local TSV/CSV/JSONL, HF datasets).

Readers keep labels *raw* (the string found in the file, or the class index a Hugging Face
dataset already holds); `lightning_modules.tasks.load_task` maps them onto the task's label set
and raises a DataError naming the file and row for a value outside it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

MAX_REPORTED_ROWS = 10  # first row numbers kept/printed for malformed rows


@dataclass(frozen=True)
class TextExample:
    texts: tuple[str, ...]  # one sentence, or a pair (a, b)
    label: str | int | float | None  # file value (str), HF class index (int) / score, None: unlabelled
    row: int  # 1-based line number in the file (header included), or the index in an HF split
    id: str  # the example's id in submission files (the file's index column, else row order)
    group: str | None = None  # examples scored together (MultiRC: a question's answer options)


@dataclass
class Split:
    name: str  # train | dev | dev_matched | dev_mismatched | test | test_matched | ...
    examples: list[TextExample]
    source: str  # the file read, or "hf:<name>/<config>/<split>"
    has_labels: bool
    malformed_rows: int = 0  # rows skipped because their field count was wrong (QQP)
    malformed_row_numbers: list[int] = field(default_factory=list)  # the first MAX_REPORTED_ROWS

    def __len__(self) -> int:
        return len(self.examples)


@dataclass
class TaskData:
    """All splits of one task. `eval_splits` are labelled splits scored after training (in
    order: the first is the main one); `test_splits` are unlabelled splits to predict."""

    splits: dict[str, Split]
    eval_splits: list[str]
    test_splits: list[str] = field(default_factory=list)
    train_split: str = "train"
    notes: list[str] = field(default_factory=list)  # e.g. "MNLI dev is the 240-row subset"
    # split -> where its examples came from, when a reader draws or splits them (SuperGLUE's
    # few-shot sample, a seeded split of the dev file): the finetune summary's `data_origin`
    origin: dict[str, str] = field(default_factory=dict)

    @property
    def train(self) -> Split:
        return self.splits[self.train_split]

    @property
    def malformed_rows(self) -> int:
        return sum(s.malformed_rows for s in self.splits.values())


def report_malformed(split: Split, what: str) -> None:
    """One warning line with the count and the first row numbers; never a silent drop."""
    if split.malformed_rows:
        rows = ", ".join(str(r) for r in split.malformed_row_numbers)
        more = " ..." if split.malformed_rows > len(split.malformed_row_numbers) else ""
        log.warning(
            "%s: skipped %d malformed row(s) in %s (wrong number of fields; first line numbers: %s%s)",
            what,
            split.malformed_rows,
            split.source,
            rows,
            more,
        )


def delimited_split(
    name: str, path, reader, header: list[str], text_columns: list[int], label_column: int | None, id_column: int | None
) -> Split:
    """Split `name` from a csv reader's remaining rows (GLUE's TSVs, the tabular reader's CSV/TSV):
    a row of another width than the header is skipped and counted (its line number kept for the
    warning, report_malformed); an example's id is its id column or its position."""
    examples: list[TextExample] = []
    malformed: list[int] = []
    n_malformed = 0
    for position, row in enumerate(reader):
        if len(row) != len(header):
            n_malformed += 1
            if len(malformed) < MAX_REPORTED_ROWS:
                malformed.append(reader.line_num)
            continue
        examples.append(
            TextExample(
                texts=tuple(row[c] for c in text_columns),
                label=row[label_column].strip() if label_column is not None else None,
                row=reader.line_num,
                id=row[id_column] if id_column is not None else str(position),
            )
        )
    return Split(
        name,
        examples,
        str(path),
        has_labels=label_column is not None,
        malformed_rows=n_malformed,
        malformed_row_numbers=malformed,
    )
