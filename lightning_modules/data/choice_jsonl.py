"""Multiple-choice JSON Lines: one object per line holding a context, N >= 2 choices and the index of
the right one (`task.kind: multiple_choice`).

Where the fields are (`task.data.*`):

    context_field   a field, or a list of fields joined by one space (SWAG: [sent1, sent2], the
                    "startphrase" the endings complete); "" or null: no context
    choices_field   a field holding a list of strings (`choices`), a list of fields ([choice1,
                    choice2]: COPA), or a pattern with {i} (`ending{i}`: SWAG's ending0..endingN,
                    read from 0 while the field exists)
    label_field     the right choice's 0-based index (an int, or its digits as a string)
    id_field        the example's id in prediction files (null: its row number)
    connective_field, connectives
                    COPA: the premise becomes a sentence stem, its final period replaced by the
                    connective its `question` names ({cause: because, effect: so}), and each
                    choice continues it with its first letter lowercased (as lm-evaluation-harness
                    builds COPA, which says "therefore" where this says "so")

`train_from_dev: N` (with `split_seed`) is for tasks that ship only a validation set: N dev rows
drawn with the seed become the training split and the rest stay dev; the split is written into
TaskData.origin, which the finetune summary reports (`data_origin`).

A missing file, a line that is not a JSON object, a missing field, fewer than two choices, a
choice that is not a non-empty string or a label outside 0..N-1 is a DataError naming the file
and the line, before anything trains.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from lightning_modules.data.jsonl_objects import jsonl_objects
from lightning_modules.data.task_data import Split, TaskData
from ptmlab.contracts import DataError
from ptmlab.methods.readers import MultipleChoiceReaderParams

CHOICE_INDEX = "{i}"  # in choices_field: SWAG-style numbered fields


@dataclass(frozen=True)
class ChoiceExample:
    context: str
    choices: tuple[str, ...]
    label: int | None  # the right choice's index; None: unlabelled
    row: int  # 1-based line number in the file
    id: str

    @property
    def texts(self) -> tuple[str, ...]:
        return (self.context, *self.choices)


class MultipleChoiceReader:
    declaration = MultipleChoiceReaderParams

    def __init__(
        self,
        train: str,
        dev: str,
        test: str | None = None,
        context_field: str | list[str] | None = "context",
        choices_field: str | list[str] = "choices",
        label_field: str = "label",
        id_field: str | None = None,
        connective_field: str | None = None,
        connectives: dict[str, str] | None = None,
        train_from_dev: int | None = None,
        split_seed: int = 0,
    ):
        self.files = {"train": train, "dev": dev, **({"test": test} if test else {})}
        self.context_fields = (
            []
            if not context_field
            else [context_field]
            if isinstance(context_field, str)
            else [str(f) for f in context_field]
        )
        self.choices_field = choices_field if isinstance(choices_field, str) else [str(f) for f in choices_field]
        self.label_field, self.id_field = label_field, id_field
        self.connective_field, self.connectives = connective_field, dict(connectives or {})
        self.train_from_dev, self.split_seed = train_from_dev, int(split_seed)

    def read(self) -> TaskData:
        files = dict(self.files)
        if self.train_from_dev is not None:
            files.pop("train")
        splits = {name: self.read_split(name, path, labelled=name != "test") for name, path in files.items()}
        origin: dict[str, str] = {}
        if self.train_from_dev is not None:
            dev = splits["dev"]
            n = int(self.train_from_dev)
            if not 0 < n < len(dev):
                raise DataError(
                    f"{dev.source}: task.data.train_from_dev={n} must leave rows on both sides "
                    f"(the file has {len(dev)})"
                )
            drawn = set(random.Random(self.split_seed).sample(range(len(dev)), n))
            splits["train"] = Split("train", [ex for i, ex in enumerate(dev.examples) if i in drawn], dev.source, True)
            splits["dev"] = Split("dev", [ex for i, ex in enumerate(dev.examples) if i not in drawn], dev.source, True)
            # the same marking as SuperGLUE's reader (data/superglue.py): the summary's data_origin
            origin = {
                "train": f"seeded split of {dev.source}: {n} of {len(dev)} rows (task.data.train_from_dev, "
                f"seed {self.split_seed})",
                "dev": f"{dev.source}: the other {len(dev) - n} rows of the seeded split",
            }
        order = {"train": 0, "dev": 1, "test": 2}
        return TaskData(
            splits=dict(sorted(splits.items(), key=lambda kv: order[kv[0]])),
            eval_splits=["dev"],
            test_splits=["test"] if "test" in splits else [],
            origin=origin,
        )

    def read_split(self, name: str, path: str | Path, labelled: bool = True) -> Split:
        path = Path(path)
        if not path.is_file():
            raise DataError(f"{path}: multiple-choice file not found (task.data.{name})")
        with path.open(encoding="utf-8-sig") as f:
            examples = [self._example(path, row, record, labelled) for row, record in jsonl_objects(path, f)]
        if not examples:
            raise DataError(f"{path}: no rows (task.data.{name})")
        return Split(name=name, examples=examples, source=str(path), has_labels=labelled)

    def _example(self, path: Path, row: int, record: dict, labelled: bool) -> ChoiceExample:
        where = f"{path}: line {row}"
        context = " ".join(_text(record, f, where) for f in self.context_fields)
        choices = self._choices(record, where)
        if self.connective_field:
            context, choices = self._connect(record, context, choices, where)
        label = _label(record, self.label_field, len(choices), where) if labelled else None
        example_id = str(record[self.id_field]) if self.id_field and self.id_field in record else str(row)
        return ChoiceExample(context=context, choices=choices, label=label, row=row, id=example_id)

    def _choices(self, record: dict, where: str) -> tuple[str, ...]:
        spec = self.choices_field
        if isinstance(spec, list):
            choices = [_text(record, f, where) for f in spec]
        elif CHOICE_INDEX in spec:
            names = []
            while spec.replace(CHOICE_INDEX, str(len(names))) in record:
                names.append(spec.replace(CHOICE_INDEX, str(len(names))))
            choices = [_text(record, f, where) for f in names]
        else:
            value = record.get(spec)
            if not isinstance(value, list):
                raise DataError(f'{where}: "{spec}" is missing or not a list of choices (task.data.choices_field)')
            choices = [_choice(v, f"{spec}[{i}]", where) for i, v in enumerate(value)]
        if len(choices) < 2:
            raise DataError(
                f"{where}: {len(choices)} choice(s); a multiple-choice row needs at least 2 "
                f"(task.data.choices_field={spec})"
            )
        return tuple(choices)

    def _connect(self, record: dict, context: str, choices: tuple[str, ...], where: str) -> tuple[str, tuple[str, ...]]:
        key = _text(record, self.connective_field, where)
        if key not in self.connectives:
            raise DataError(
                f"{where}: {self.connective_field}={key!r} has no connective (task.data.connectives: "
                f"{', '.join(self.connectives)})"
            )
        stem = context.strip()
        stem = stem[:-1] if stem.endswith(".") else stem
        return f"{stem} {self.connectives[key]}", tuple(c[0].lower() + c[1:] for c in choices)


def _choice(value, field: str, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise DataError(f'{where}: choice "{field}" is {value!r}, not a non-empty string')
    return value


def _text(record: dict, field: str, where: str) -> str:
    if field not in record:
        raise DataError(f'{where}: field "{field}" is missing')
    return _choice(record[field], field, where)


def _label(record: dict, field: str, n: int, where: str) -> int:
    if field not in record:
        raise DataError(f'{where}: field "{field}" (the right choice) is missing (task.data.label_field)')
    raw = record[field]
    value = (
        raw
        if isinstance(raw, int) and not isinstance(raw, bool)
        else int(raw)
        if isinstance(raw, str) and raw.strip().isdigit()
        else None
    )
    if value is None or not 0 <= value < n:
        raise DataError(f"{where}: label {raw!r} is not a choice index 0..{n - 1}")
    return value
