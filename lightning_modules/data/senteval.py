"""SentEval single-sentence classification sets (MR, CR, SUBJ, MPQA) as in the shared data:
`<data_dir>/<TASK>/{train,dev,test}.tsv`, each line `label<TAB>sentence`, no header.

Sentences are lower-cased and tokenised already; the train/dev split is the one of the source
repository (see ../shared/data/MANIFEST.md), not an official one: SentEval itself uses 10-fold
cross-validation on these sets. A line without exactly two fields is skipped, counted and
reported like GLUE's malformed rows.
"""

from __future__ import annotations

import csv
from pathlib import Path

from lightning_modules.data.task_data import MAX_REPORTED_ROWS, Split, TaskData, TextExample, report_malformed
from ptmlab.contracts import ConfigError, DataError
from ptmlab.methods.readers import SentEvalReaderParams

SENTEVAL_TASKS = ("MR", "CR", "SUBJ", "MPQA")


def read_senteval_file(path: str | Path, split: str) -> Split:
    path = Path(path)
    if not path.is_file():
        raise DataError(f"SentEval file not found: {path} (split {split})")
    examples: list[TextExample] = []
    malformed: list[int] = []
    n_malformed = 0
    with path.open(encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        for position, row in enumerate(reader):
            if len(row) != 2:
                n_malformed += 1
                if len(malformed) < MAX_REPORTED_ROWS:
                    malformed.append(reader.line_num)
                continue
            examples.append(TextExample(texts=(row[1],), label=row[0].strip(), row=reader.line_num, id=str(position)))
    result = Split(
        split, examples, str(path), has_labels=True, malformed_rows=n_malformed, malformed_row_numbers=malformed
    )
    report_malformed(result, f"SentEval {split}")
    return result


class SentEvalReader:
    """`_target_` of `task.data` in conf/task/senteval/*.yaml."""

    declaration = SentEvalReaderParams

    def __init__(self, task: str, data_dir: str):
        if task not in SENTEVAL_TASKS:
            raise ConfigError(f"task.data.task={task} is not a SentEval task; valid: {', '.join(SENTEVAL_TASKS)}")
        self.task, self.data_dir = task, Path(data_dir)

    def read(self) -> TaskData:
        folder = self.data_dir / self.task
        splits = {
            "train": read_senteval_file(folder / "train.tsv", "train"),
            "dev": read_senteval_file(folder / "dev.tsv", "dev"),
        }
        eval_splits = ["dev"]
        if (folder / "test.tsv").is_file():  # labelled, like dev
            splits["test"] = read_senteval_file(folder / "test.tsv", "test")
            eval_splits.append("test")
        return TaskData(splits=splits, eval_splits=eval_splits)
