"""SuperGLUE JSONL files (the official format, FewGLUE's files alike) as ptmlab task data.

    task=superglue/boolq                                        the shipped FewGLUE files
    task=superglue/cb task.data.train=<f> task.data.dev=<f>    any file in the task's format
    task=superglue/rte task.few_shot=16                         16 records of train, drawn with task.data.seed
    task=superglue/wic task.data.train_from_dev=400             a seeded split of the dev file: 400
                                                                records train, the rest dev (no train file read)

One record per line; `superglue_rows.py` turns a record into examples (MultiRC: one per answer
option). The few-shot protocol of the PET papers (Schick & Schütze 2021): `task.few_shot=32` on the
shipped 32-example `train.jsonl` is that whole file; fewer records are drawn with `task.data.seed`
and kept in file order. Records, not examples, are drawn and split: a MultiRC paragraph stays whole,
so no passage is on both sides of a split. Where each split came from is in `TaskData.origin`
(the finetune summary's `data_origin`), which says when a training set is a split of the dev file.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path

from lightning_modules.data.jsonl_objects import jsonl_objects
from lightning_modules.data.superglue_rows import ROW_READERS, RowContext
from lightning_modules.data.task_data import Split, TaskData, TextExample
from ptmlab.contracts import ConfigError, DataError
from ptmlab.methods.readers import SuperGlueReaderParams

log = logging.getLogger(__name__)


def read_records(path: str | Path, key: str) -> list[tuple[int, dict]]:
    """(line number, record) of every non-blank line; a missing file or a line that is not a JSON
    object is a DataError naming it."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: SuperGLUE file not found ({key})")
    with path.open(encoding="utf-8") as f:
        records = list(jsonl_objects(path, f))
    if not records:
        raise DataError(f"{path}: no records ({key})")
    return records


def records_to_split(task: str, name: str, path: str | Path, records: list[tuple[int, dict]]) -> Split:
    convert = ROW_READERS[task]
    examples: list[TextExample] = []
    mismatches = 0
    for line_no, record in records:
        ctx = RowContext(str(path), line_no)
        examples += convert(record, ctx)
        mismatches += ctx.mismatches
    if mismatches:
        log.warning(
            "%s: %d span(s) whose text differs from the words at their index (marked at the index)", path, mismatches
        )
    return Split(name, examples, str(path), has_labels=True)


class SuperGlueReader:
    """`_target_` of `task.data` in conf/task/superglue/*.yaml."""

    declaration = SuperGlueReaderParams

    def __init__(
        self,
        task: str,
        train: str | None = None,
        dev: str | None = None,
        few_shot: int | None = None,
        train_from_dev: int | None = None,
        seed: int = 42,
    ):
        if task not in ROW_READERS:
            raise ConfigError(
                f"task.data.task={task} is not a SuperGLUE task read here; valid: {', '.join(ROW_READERS)}"
            )
        for key, value in (("task.few_shot", few_shot), ("task.data.train_from_dev", train_from_dev)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ConfigError(f"{key}={value} must be null or a positive integer")
        if few_shot is not None and train_from_dev is not None:
            raise ConfigError(
                f"task.few_shot={few_shot} and task.data.train_from_dev={train_from_dev}: pick one "
                f"(few_shot draws from the train file, train_from_dev splits the dev file)"
            )
        if dev is None or (train is None and train_from_dev is None):
            raise ConfigError("task.data.dev and task.data.train are required (or task.data.train_from_dev with dev)")
        self.task, self.train, self.dev = task, train, dev
        self.few_shot, self.train_from_dev, self.seed = few_shot, train_from_dev, int(seed)

    def read(self) -> TaskData:
        dev_records = read_records(self.dev, "task.data.dev")
        if self.train_from_dev is not None:
            train_records, dev_records, origin = self._split_dev(dev_records)
            train_path = self.dev
        else:
            train_records = read_records(self.train, "task.data.train")
            train_path, origin = self.train, {"train": str(self.train), "dev": str(self.dev)}
            if self.few_shot is not None:
                drawn = "the whole file" if self.few_shot == len(train_records) else f"drawn with seed {self.seed}"
                train_records = self._draw(train_records)
                origin["train"] = f"{self.train}: {self.few_shot} records (task.few_shot, {drawn})"
        splits = {
            "train": records_to_split(self.task, "train", train_path, train_records),
            "dev": records_to_split(self.task, "dev", self.dev, dev_records),
        }
        return TaskData(splits=splits, eval_splits=["dev"], origin=origin)

    def _draw(self, records: list[tuple[int, dict]]) -> list[tuple[int, dict]]:
        """`few_shot` records of the train file: all of them when it holds exactly that many (FewGLUE's
        32), else a seeded sample kept in file order."""
        if len(records) < self.few_shot:
            raise DataError(f"{self.train}: task.few_shot={self.few_shot} but the file holds {len(records)} records")
        if len(records) == self.few_shot:
            return records
        keep = sorted(random.Random(self.seed).sample(range(len(records)), self.few_shot))
        return [records[i] for i in keep]

    def _split_dev(self, records: list[tuple[int, dict]]):
        n = self.train_from_dev
        if n >= len(records):
            raise DataError(
                f"{self.dev}: task.data.train_from_dev={n} leaves no dev records (the file holds {len(records)})"
            )
        order = list(range(len(records)))
        random.Random(self.seed).shuffle(order)
        train_idx = set(order[:n])
        train = [r for i, r in enumerate(records) if i in train_idx]
        dev = [r for i, r in enumerate(records) if i not in train_idx]
        origin = {
            "train": f"seeded split of {self.dev}: {n} of {len(records)} records (task.data.train_from_dev, "
            f"seed {self.seed})",
            "dev": f"{self.dev}: the other {len(dev)} records of the seeded split",
        }
        return train, dev, origin
