"""Any local TSV, CSV or JSONL file with named text field(s) and a label (or score) field.

TSV/CSV need a header row naming the fields; JSONL holds one object per line. The format comes
from the file extension (.tsv .csv .jsonl .json) unless `format` says otherwise. A test file
may lack the label field (then its split is unlabelled). A missing field is a DataError naming
the file, the line and the key.
"""

from __future__ import annotations

import csv
from pathlib import Path

from lightning_modules.data.jsonl_objects import jsonl_objects
from lightning_modules.data.task_data import Split, TaskData, TextExample, delimited_split, report_malformed
from ptmlab.contracts import ConfigError, DataError
from ptmlab.methods.readers import TabularReaderParams

FORMATS = ("tsv", "csv", "jsonl")
QUOTING = {"none": csv.QUOTE_NONE, "minimal": csv.QUOTE_MINIMAL}
EXTENSIONS = {".tsv": "tsv", ".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl"}


class TabularReader:
    """`_target_` of `task.data` in conf/task/tabular.yaml."""

    declaration = TabularReaderParams

    def __init__(
        self,
        train: str,
        dev: str,
        text_fields: list[str],
        label_field: str | None = "label",
        test: str | None = None,
        id_field: str | None = None,
        format: str = "auto",
        quoting: str | None = None,
    ):
        if not train or not dev:
            raise ConfigError("task.data.train and task.data.dev must name files (TSV, CSV or JSONL)")
        text_fields = list(text_fields or [])
        if len(text_fields) not in (1, 2):
            raise ConfigError(f"task.data.text_fields must name one or two fields, got {text_fields}")
        if format not in ("auto", *FORMATS):
            raise ConfigError(f"task.data.format={format} is unknown; valid: auto, {', '.join(FORMATS)}")
        if quoting is not None and quoting not in QUOTING:
            raise ConfigError(f"task.data.quoting={quoting} is unknown; valid: {', '.join(QUOTING)}")
        self.files = {"train": train, "dev": dev, **({"test": test} if test else {})}
        self.text_fields, self.label_field, self.id_field = text_fields, label_field, id_field
        self.format, self.quoting = format, quoting

    def read(self) -> TaskData:
        splits = {name: self.read_file(path, name) for name, path in self.files.items()}
        for name in ("train", "dev"):
            if not splits[name].has_labels:
                raise DataError(
                    f"{splits[name].source}: label field '{self.label_field}' missing "
                    f"(task.data.label_field; the {name} split needs labels)"
                )
        test = splits.get("test")
        return TaskData(
            splits=splits,
            eval_splits=["dev"] + (["test"] if test and test.has_labels else []),
            test_splits=["test"] if test and not test.has_labels else [],
        )

    def _format_of(self, path: Path) -> str:
        if self.format != "auto":
            return self.format
        fmt = EXTENSIONS.get(path.suffix.lower())
        if fmt is None:
            raise ConfigError(
                f"cannot tell the format of {path} from its extension; set task.data.format "
                f"to one of {', '.join(FORMATS)}"
            )
        return fmt

    def read_file(self, path: str | Path, split: str) -> Split:
        path = Path(path)
        if not path.is_file():
            raise DataError(f"data file not found: {path} (task.data.{split})")
        fmt = self._format_of(path)
        if fmt == "jsonl":
            return self._read_jsonl(path, split)
        return self._read_delimited(path, split, fmt)

    def _read_delimited(self, path: Path, split: str, fmt: str) -> Split:
        quoting = QUOTING[self.quoting or ("none" if fmt == "tsv" else "minimal")]
        with path.open(encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(f, delimiter="\t" if fmt == "tsv" else ",", quoting=quoting)
            header = next(reader, None)
            if header is None:
                raise DataError(f"{path}: empty file (task.data.{split})")
            cols = {}
            for key in ("text_fields", "label_field", "id_field"):
                names = self.text_fields if key == "text_fields" else [getattr(self, key)]
                for name in names:
                    if name is None:
                        continue
                    if name not in header:
                        if key == "label_field" or key == "id_field":
                            cols[name] = None  # checked below: labels are required on train/dev
                            continue
                        raise DataError(
                            f"{path}: field '{name}' (task.data.{key}) missing from the header ({', '.join(header)})"
                        )
                    cols[name] = header.index(name)
            label_col = cols.get(self.label_field) if self.label_field else None
            id_col = cols.get(self.id_field) if self.id_field else None
            result = delimited_split(
                split, path, reader, header, [cols[n] for n in self.text_fields], label_col, id_col
            )
        report_malformed(result, f"task.data.{split}")
        return result

    def _read_jsonl(self, path: Path, split: str) -> Split:
        examples = []
        has_labels = None
        with path.open(encoding="utf-8-sig") as f:
            for line_no, record in jsonl_objects(path, f):
                for name in self.text_fields:
                    if name not in record:
                        raise DataError(f"{path}:{line_no}: field '{name}' (task.data.text_fields) missing")
                labelled = self.label_field is not None and self.label_field in record
                if has_labels is None:
                    has_labels = labelled
                elif labelled != has_labels:
                    raise DataError(
                        f"{path}:{line_no}: field '{self.label_field}' (task.data.label_field) missing"
                        if has_labels
                        else f"{path}:{line_no}: has '{self.label_field}' but earlier lines do not"
                    )
                label = record[self.label_field] if labelled else None
                if isinstance(label, bool) or isinstance(label, str):
                    label = str(label).strip()
                elif isinstance(label, int | float):
                    label = str(label) if isinstance(label, int) else float(label)
                examples.append(
                    TextExample(
                        texts=tuple(str(record[n]) for n in self.text_fields),
                        label=label,
                        row=line_no,
                        id=str(record[self.id_field])
                        if self.id_field and self.id_field in record
                        else str(len(examples)),
                    )
                )
        return Split(split, examples, str(path), has_labels=bool(has_labels))
