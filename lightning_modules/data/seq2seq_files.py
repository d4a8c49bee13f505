"""The reader of `task.kind: generation` (conf/task/seq2seq.yaml, mt/, summarization/): each split
is either a pair of line-aligned files (`{source: f, target: f}`, data/line_pairs.py) or one JSON
Lines file (a path, data/jsonl_pairs.py, reading `source_field` / `target_field`). Examples are
`TextExample(texts=(source,), label=(reference, ...))`."""

from __future__ import annotations

from collections.abc import Mapping

from lightning_modules.data.jsonl_pairs import read_jsonl_pairs
from lightning_modules.data.line_pairs import read_line_pairs
from lightning_modules.data.task_data import Split, TaskData
from ptmlab.contracts import ConfigError, DataError
from ptmlab.methods.readers import Seq2SeqReaderParams


class Seq2SeqReader:
    declaration = Seq2SeqReaderParams

    def __init__(self, train, dev, test=None, source_field: str = "source", target_field="target"):
        self.files = {"train": train, "dev": dev, **({"test": test} if test is not None else {})}
        self.source_field = str(source_field)
        self.target_field = target_field if isinstance(target_field, str) else [str(f) for f in target_field]

    def read_split(self, name: str, spec) -> Split:
        if isinstance(spec, Mapping):
            unknown = set(spec) - {"source", "target"}
            if unknown or not spec.get("source"):
                raise ConfigError(
                    f"task.data.{name} needs 'source' (and 'target') file paths, or one JSONL path; "
                    f"got keys {sorted(spec)}"
                )
            return read_line_pairs(name, spec["source"], spec.get("target"))
        if not isinstance(spec, str) or not spec:
            raise ConfigError(f"task.data.{name} must be a JSONL path or {{source: <file>, target: <file>}}")
        return read_jsonl_pairs(name, spec, self.source_field, self.target_field)

    def read(self) -> TaskData:
        splits = {name: self.read_split(name, spec) for name, spec in self.files.items()}
        if not splits["train"].has_labels:
            raise DataError(f"{splits['train'].source}: the train split has no targets")
        evals = [n for n in ("dev", "test") if n in splits and splits[n].has_labels]
        tests = [n for n in ("dev", "test") if n in splits and not splits[n].has_labels]
        return TaskData(splits=splits, eval_splits=evals, test_splits=tests)
