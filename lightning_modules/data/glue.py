"""GLUE readers: the original TSV layout `<data_dir>/<TASK>/{train,dev,test}.tsv`, quirks included,
and Hugging Face `nyu-mll/glue` by name (when online).

Files are read as GLUE's own loaders do: `csv` with tab delimiter and `QUOTE_NONE` (quotes are
text: MRPC's `"The foodservice ...` keeps its quote), UTF-8 with the byte-order mark stripped
(MRPC's header starts with one). Per-task quirks:

  CoLA   train/dev have NO header: source, label, original-judgment, sentence; test has a header
         `index, sentence`. dev.tsv lacks a final newline.
  MRPC   UTF-8 BOM before `Quality`; text columns `#1 String`, `#2 String`.
  QQP    malformed rows (wrong number of fields, from newlines inside questions) are skipped,
         counted in `Split.malformed_rows` and reported in one warning line with the count and
         the first line numbers, never dropped silently.
  STS-B  float similarity scores (0-5) in `score`.
  MNLI   two dev files (dev_matched.tsv, dev_mismatched.tsv) and two test files. When they are
         absent and a single dev.tsv is present, dev.tsv is read as the only eval split and a note
         says so: the shared data (../shared/data/glue/MNLI) has such a 240-row dev.tsv, drawn
         from MNLI *train*, so numbers on it are not "MNLI dev" numbers. Label = `gold_label`.
  test   files have no label column: their split has `has_labels=False` and labels None.

A missing file is a DataError naming the path looked for.
"""

from __future__ import annotations

import csv
import sys
from dataclasses import dataclass
from pathlib import Path

from lightning_modules.data.task_data import Split, TaskData, TextExample, delimited_split, report_malformed
from ptmlab.contracts import ConfigError, DataError
from ptmlab.methods.readers import GlueReaderParams

# Some GLUE rows (QNLI, MNLI parses) are longer than csv's default 128 KiB field limit.
csv.field_size_limit(min(sys.maxsize, 2**31 - 1))


@dataclass(frozen=True)
class GlueLayout:
    folder: str  # the task's folder in the GLUE download: CoLA, SST-2, ...
    text_columns: tuple[str, ...]  # header names of the sentence (pair) columns
    label_column: str
    id_column: str | None  # None: the example id is its position among the data rows
    eval_files: tuple[tuple[str, str], ...] = (("dev", "dev.tsv"),)  # (split, file name)
    test_files: tuple[tuple[str, str], ...] = (("test", "test.tsv"),)
    headerless_columns: tuple[str, ...] | None = None  # CoLA train/dev: names of unnamed columns
    test_id_column: str = "index"


GLUE_LAYOUTS: dict[str, GlueLayout] = {
    "cola": GlueLayout(
        "CoLA", ("sentence",), "label", None, headerless_columns=("source", "label", "original_judgment", "sentence")
    ),
    "sst2": GlueLayout("SST-2", ("sentence",), "label", None),
    "mrpc": GlueLayout("MRPC", ("#1 String", "#2 String"), "Quality", None),
    "stsb": GlueLayout("STS-B", ("sentence1", "sentence2"), "score", "index"),
    "qqp": GlueLayout("QQP", ("question1", "question2"), "is_duplicate", "id", test_id_column="id"),
    "mnli": GlueLayout(
        "MNLI",
        ("sentence1", "sentence2"),
        "gold_label",
        "index",
        eval_files=(("dev_matched", "dev_matched.tsv"), ("dev_mismatched", "dev_mismatched.tsv")),
        test_files=(("test_matched", "test_matched.tsv"), ("test_mismatched", "test_mismatched.tsv")),
    ),
    "qnli": GlueLayout("QNLI", ("question", "sentence"), "label", "index"),
    "rte": GlueLayout("RTE", ("sentence1", "sentence2"), "label", "index"),
    "wnli": GlueLayout("WNLI", ("sentence1", "sentence2"), "label", "index"),
}

# Hugging Face `nyu-mll/glue`: text columns per config and split names -> ours.
HF_TEXT_COLUMNS: dict[str, tuple[str, ...]] = {
    "cola": ("sentence",),
    "sst2": ("sentence",),
    "mrpc": ("sentence1", "sentence2"),
    "qqp": ("question1", "question2"),
    "stsb": ("sentence1", "sentence2"),
    "mnli": ("premise", "hypothesis"),
    "qnli": ("question", "sentence"),
    "rte": ("sentence1", "sentence2"),
    "wnli": ("sentence1", "sentence2"),
}
HF_SPLIT_NAMES = {
    "train": "train",
    "validation": "dev",
    "validation_matched": "dev_matched",
    "validation_mismatched": "dev_mismatched",
    "test": "test",
    "test_matched": "test_matched",
    "test_mismatched": "test_mismatched",
}


def glue_layout(task: str) -> GlueLayout:
    try:
        return GLUE_LAYOUTS[task]
    except KeyError:
        raise ConfigError(f"task.data.task={task} is not a GLUE task; valid: {', '.join(GLUE_LAYOUTS)}") from None


def read_glue_file(path: str | Path, task: str, split: str, *, labelled: bool = True) -> Split:
    """Read one GLUE TSV file exactly as distributed. `labelled=False` for test files."""
    layout = glue_layout(task)
    path = Path(path)
    if not path.is_file():
        raise DataError(f"GLUE file not found: {path} (task {task}, split {split})")
    # utf-8-sig strips MRPC's byte-order mark; newline="" lets csv see the raw line ends.
    with path.open(encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        if labelled and layout.headerless_columns is not None:
            header = list(layout.headerless_columns)
        else:
            header = next(reader, None)
            if header is None:
                raise DataError(f"{path}: empty file (task {task}, split {split})")
        text_cols = [_column(header, name, path) for name in layout.text_columns]
        label_col = _column(header, layout.label_column, path) if labelled else None
        id_name = layout.id_column if labelled else layout.test_id_column
        id_col = header.index(id_name) if id_name in header else None
        result = delimited_split(split, path, reader, header, text_cols, label_col, id_col)
    report_malformed(result, f"GLUE {task} {split}")
    return result


def _column(header: list[str], name: str, path: Path) -> int:
    try:
        return header.index(name)
    except ValueError:
        raise DataError(f"{path}: column '{name}' missing from the header ({', '.join(header)})") from None


class GlueReader:
    """`_target_` of `task.data` in conf/task/glue/*.yaml.

    source=local reads `<data_dir>/<TASK>/...`; source=hf loads `hf_name` (nyu-mll/glue) with
    the task as config name through `datasets.load_dataset` (needs the network or a cache).
    `files` overrides file names per split, e.g. `{dev: dev_tokenized.tsv}` for MRPC.
    """

    declaration = GlueReaderParams

    def __init__(
        self,
        task: str,
        data_dir: str | None = None,
        source: str = "local",
        hf_name: str = "nyu-mll/glue",
        files: dict[str, str] | None = None,
        read_test: bool = True,
    ):
        glue_layout(task)
        if source not in ("local", "hf"):
            raise ConfigError(f"task.data.source={source} is unknown; valid: local, hf")
        if source == "local" and not data_dir:
            raise ConfigError("task.data.data_dir is required for task.data.source=local")
        self.task, self.source, self.hf_name = task, source, hf_name
        self.data_dir = Path(data_dir) if data_dir else None
        self.files = dict(files or {})
        self.read_test = read_test

    def read(self) -> TaskData:
        return self._read_hf() if self.source == "hf" else self._read_local()

    def _read_local(self) -> TaskData:
        layout = glue_layout(self.task)
        folder = self.data_dir / layout.folder
        if not folder.is_dir():
            raise DataError(
                f"GLUE folder not found: {folder} (task {self.task}; expected the original "
                f"layout <data_dir>/{layout.folder}/{{train,dev,test}}.tsv)"
            )
        notes: list[str] = []
        splits = {"train": read_glue_file(folder / self.files.get("train", "train.tsv"), self.task, "train")}
        eval_files = [(s, self.files.get(s, name)) for s, name in layout.eval_files]
        present = [(s, name) for s, name in eval_files if (folder / name).is_file()]
        if not present and self.task == "mnli" and (folder / self.files.get("dev", "dev.tsv")).is_file():
            # The second layout: a single dev.tsv (the shared data's 240-row MNLI subset).
            present = [("dev", self.files.get("dev", "dev.tsv"))]
            notes.append(
                f"MNLI: {folder}/dev_matched.tsv and dev_mismatched.tsv not found; read "
                f"{folder}/dev.tsv as the only eval split (matched accuracy only; in the shared "
                f"data it is a 240-row subset drawn from MNLI train, not the official dev)"
            )
        elif len(present) < len(eval_files):
            if not present:
                looked = " or ".join(str(folder / name) for _, name in eval_files)
                raise DataError(f"GLUE file not found: {looked} (task {self.task}, eval split)")
            missing = [str(folder / name) for s, name in eval_files if (s, name) not in present]
            notes.append(f"{self.task}: {', '.join(missing)} not found; evaluating on {present[0][1]} only")
        for split, name in present:
            splits[split] = read_glue_file(folder / name, self.task, split)
        test_splits = []
        if self.read_test:
            for split, name in layout.test_files:
                name = self.files.get(split, name)
                if (folder / name).is_file():
                    splits[split] = read_glue_file(folder / name, self.task, split, labelled=False)
                    test_splits.append(split)
        return TaskData(splits=splits, eval_splits=[s for s, _ in present], test_splits=test_splits, notes=notes)

    def _read_hf(self) -> TaskData:
        try:
            import datasets

            dataset_dict = datasets.load_dataset(self.hf_name, self.task)
        except Exception as exc:
            raise DataError(
                f"cannot load Hugging Face dataset {self.hf_name} config {self.task} "
                f"(task.data.source=hf; offline or not cached?): {type(exc).__name__}: "
                f"{str(exc).splitlines()[0] if str(exc) else ''}"
            ) from None
        return task_data_from_hf(dataset_dict, self.task, self.hf_name)


def task_data_from_hf(dataset_dict, task: str, hf_name: str = "nyu-mll/glue") -> TaskData:
    """Convert a `datasets.DatasetDict` in nyu-mll/glue's schema (labels are class indices,
    -1 on test splits; STS-B labels are float scores)."""
    columns = HF_TEXT_COLUMNS[task]
    splits: dict[str, Split] = {}
    for hf_split, ours in HF_SPLIT_NAMES.items():
        if hf_split not in dataset_dict:
            continue
        ds = dataset_dict[hf_split]
        missing = [c for c in (*columns, "label") if c not in ds.column_names]
        if missing:
            raise DataError(
                f"hf:{hf_name}/{task}/{hf_split}: column(s) {', '.join(missing)} missing "
                f"(found: {', '.join(ds.column_names)})"
            )
        labels = ds["label"]
        labelled = not ours.startswith("test")
        texts = [ds[c] for c in columns]
        ids = ds["idx"] if "idx" in ds.column_names else list(range(len(ds)))
        examples = [
            TextExample(
                texts=tuple(t[i] for t in texts),
                label=(labels[i] if labelled and labels[i] != -1 else None),
                row=i,
                id=str(ids[i]),
            )
            for i in range(len(ds))
        ]
        splits[ours] = Split(ours, examples, f"hf:{hf_name}/{task}/{hf_split}", has_labels=labelled)
    if "train" not in splits:
        raise DataError(f"hf:{hf_name}/{task}: no train split (found: {', '.join(dataset_dict)})")
    eval_splits = [s for s in ("dev", "dev_matched", "dev_mismatched") if s in splits]
    test_splits = [s for s in ("test", "test_matched", "test_mismatched") if s in splits]
    return TaskData(splits=splits, eval_splits=eval_splits, test_splits=test_splits)
