"""GLUE readers on files in each task's exact original format, and on the shared real data."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from lightning_modules.data.glue import GLUE_LAYOUTS, GlueReader, read_glue_file, task_data_from_hf
from lightning_modules.tasks.spec import load_task
from ptmlab.config import compose_config
from ptmlab.errors import ConfigError, DataError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "glue"

# task -> {split: rows}, first text(s) and raw label of the first row of train.
EXPECTED = {
    "cola": (
        {"train": 6, "dev": 4, "test": 2},
        ("Our friends won't buy this analysis, let alone the next one we propose.",),
        "1",
    ),
    "sst2": ({"train": 5, "dev": 3, "test": 2}, ("hide new secretions from the parental units ",), "0"),
    "mrpc": (
        {"train": 4, "dev": 3, "test": 2},
        (
            'Amrozi accused his brother, whom he called "the witness", of deliberately distorting his evidence.',
            'Referring to him as only "the witness", Amrozi accused his brother of deliberately distorting '
            "his evidence.",
        ),
        "1",
    ),
    "stsb": ({"train": 5, "dev": 4, "test": 2}, ("A plane is taking off.", "An air plane is taking off."), "5.000"),
    "qqp": (
        {"train": 4, "dev": 3, "test": 2},
        (
            "How is the life of a math student? Could you describe your own experiences?",
            "Which level of prepration is enough for the exam jlpt5?",
        ),
        "0",
    ),
    "mnli": (
        {"train": 7, "dev_matched": 3, "dev_mismatched": 3, "test_matched": 1, "test_mismatched": 1},
        (
            "Conceptually cream skimming has two basic dimensions - product and geography.",
            "Product and geography are what make cream skimming work.",
        ),
        "neutral",
    ),
    "qnli": ({"train": 3, "dev": 2, "test": 1}, ("When did the third Digimon series begin?",), "not_entailment"),
    "rte": (
        {"train": 3, "dev": 2, "test": 1},
        ("No Weapons of Mass Destruction Found in Iraq Yet.", "Weapons of Mass Destruction Found in Iraq."),
        "not_entailment",
    ),
    "wnli": (
        {"train": 4, "dev": 2, "test": 1},
        ("I stuck a pin through a carrot. When I pulled the pin out, it had a hole.", "The carrot had a hole."),
        "1",
    ),
}


def task_cfg(task: str, data_dir: Path | str = FIXTURES, *overrides: str):
    return compose_config([f"task=glue/{task}", f"task.data.data_dir={data_dir}", *overrides]).task


@pytest.mark.parametrize("task", list(GLUE_LAYOUTS))
def test_every_glue_task_reads_its_original_format(task):
    counts, first_texts, first_label = EXPECTED[task]
    data = GlueReader(task, str(FIXTURES)).read()
    assert {name: len(split) for name, split in data.splits.items()} == counts
    first = data.train.examples[0]
    assert first.texts[: len(first_texts)] == first_texts
    assert first.label == first_label
    for name in data.test_splits:
        split = data.splits[name]
        assert not split.has_labels and all(ex.label is None for ex in split.examples)
        assert split.examples[0].id == "0"  # the test file's index column
    assert all(data.splits[s].has_labels for s in data.eval_splits)
    # Through the config and load_task: every label maps into the task's label set.
    loaded = load_task(task_cfg(task))
    for split in [loaded.train, *loaded.eval_splits]:
        if task == "stsb":
            assert all(isinstance(ex.label, float) and 0.0 <= ex.label <= 5.0 for ex in split.examples)
        else:
            assert all(0 <= ex.label < loaded.num_labels for ex in split.examples)


def test_cola_has_no_header_and_dev_no_final_newline():
    raw = (FIXTURES / "CoLA" / "dev.tsv").read_bytes()
    assert not raw.endswith(b"\n")
    dev = read_glue_file(FIXTURES / "CoLA" / "dev.tsv", "cola", "dev")
    # The first line is data, not a header; the unterminated last line is read whole.
    assert dev.examples[0].texts == ("The weights made the rope stretch over the pulley.",)
    assert dev.examples[-1].texts == ("Bill is nodding his head.",) and dev.examples[-1].row == 4
    assert [ex.label for ex in dev.examples] == ["1", "0", "0", "1"]  # '*' judgments are label 0
    test = read_glue_file(FIXTURES / "CoLA" / "test.tsv", "cola", "test", labelled=False)
    assert [ex.id for ex in test.examples] == ["0", "1"]  # test.tsv has a header: index, sentence


def test_mrpc_byte_order_mark_and_quotes_kept_as_text():
    assert (FIXTURES / "MRPC" / "dev.tsv").read_bytes().startswith(b"\xef\xbb\xbfQuality\t")
    dev = read_glue_file(FIXTURES / "MRPC" / "dev.tsv", "mrpc", "dev")
    # QUOTE_NONE, as GLUE: a leading quote is part of the sentence, not a CSV quote.
    assert dev.examples[0].texts[1] == '"The foodservice pie business does not fit our long-term growth strategy.'
    assert [ex.label for ex in dev.examples] == ["1", "0", "0"]


def test_qqp_malformed_rows_are_counted_and_reported(caplog):
    with caplog.at_level(logging.WARNING):
        data = GlueReader("qqp", str(FIXTURES)).read()
    train = data.train
    assert train.malformed_rows == 3 and train.malformed_row_numbers == [4, 5, 7]
    assert data.malformed_rows == 3
    assert [ex.id for ex in train.examples] == ["133273", "402555", "360472", "150662"]
    warnings = [r.getMessage() for r in caplog.records if "malformed" in r.getMessage()]
    assert len(warnings) == 1
    assert "skipped 3 malformed row(s)" in warnings[0] and "4, 5, 7" in warnings[0]
    assert str(FIXTURES / "QQP" / "train.tsv") in warnings[0]


def test_stsb_scores_are_floats():
    loaded = load_task(task_cfg("stsb"))
    assert [ex.label for ex in loaded.train.examples] == [5.0, 3.8, 3.8, 2.6, 4.25]
    assert loaded.num_labels == 1 and loaded.spec.is_regression


def test_mnli_two_dev_files_and_gold_label():
    loaded = load_task(task_cfg("mnli"))
    assert loaded.data.eval_splits == ["dev_matched", "dev_mismatched"]
    assert loaded.data.test_splits == ["test_matched", "test_mismatched"]
    labels = loaded.spec.labels
    # Row 0 of dev_matched: annotators neutral, entailment, neutral ...; gold_label neutral.
    assert labels[loaded.data.splits["dev_matched"].examples[0].label] == "neutral"
    assert [labels[ex.label] for ex in loaded.data.splits["dev_mismatched"].examples] == [
        "contradiction",
        "contradiction",
        "entailment",
    ]
    assert loaded.spec.metric_key("accuracy", "dev_matched") == "accuracy"
    assert loaded.spec.metric_key("accuracy", "dev_mismatched") == "accuracy_mm"


def test_mnli_single_dev_layout_is_read_and_said(tmp_path, caplog):
    (tmp_path / "MNLI").mkdir()
    shutil.copy(FIXTURES / "MNLI" / "train.tsv", tmp_path / "MNLI" / "train.tsv")
    shutil.copy(FIXTURES / "MNLI" / "dev_matched.tsv", tmp_path / "MNLI" / "dev.tsv")
    with caplog.at_level(logging.WARNING):
        loaded = load_task(task_cfg("mnli", tmp_path))
    assert loaded.data.eval_splits == ["dev"] and len(loaded.data.splits["dev"]) == 3
    assert any("dev_matched.tsv and dev_mismatched.tsv not found" in r.getMessage() for r in caplog.records)
    assert loaded.data.notes and "dev.tsv" in loaded.data.notes[0]


def test_max_samples_take_the_first_rows():
    loaded = load_task(task_cfg("rte", FIXTURES, "task.max_train_samples=2", "task.max_eval_samples=1"))
    assert [ex.id for ex in loaded.train.examples] == ["0", "1"]
    assert [ex.id for ex in loaded.eval_splits[0].examples] == ["0"]
    assert len(loaded.test_splits[0]) == 1  # test splits are not subset


def test_mrpc_file_override_reads_the_tokenized_dev(data_dir):
    loaded = load_task(task_cfg("mrpc", data_dir / "glue", "+task.data.files.dev=dev_tokenized.tsv"))
    assert len(loaded.eval_splits[0]) == 408
    assert "doesn 't" in loaded.eval_splits[0].examples[0].texts[0]


# -- bad input: one line naming the file, row or key ------------------------------------------


def _copy_task(tmp_path: Path, folder: str) -> Path:
    shutil.copytree(FIXTURES / folder, tmp_path / folder)
    return tmp_path / folder


def test_missing_file_names_the_path(tmp_path):
    folder = _copy_task(tmp_path, "RTE")
    (folder / "dev.tsv").unlink()
    with pytest.raises(DataError, match=f"GLUE file not found: {folder / 'dev.tsv'}"):
        GlueReader("rte", str(tmp_path)).read()
    with pytest.raises(DataError, match=f"GLUE folder not found: {tmp_path / 'CoLA'}"):
        GlueReader("cola", str(tmp_path)).read()


def test_label_column_missing_names_file_and_column(tmp_path):
    folder = _copy_task(tmp_path, "SST-2")
    (folder / "train.tsv").write_text("sentence\tlabels\nfine movie\t1\n")
    with pytest.raises(DataError, match=r"train\.tsv: column 'label' missing from the header \(sentence, labels\)"):
        GlueReader("sst2", str(tmp_path)).read()


def test_label_outside_the_label_set_names_file_and_line(tmp_path):
    folder = _copy_task(tmp_path, "RTE")
    lines = (folder / "train.tsv").read_text().splitlines()
    lines[2] = lines[2].rsplit("\t", 1)[0] + "\tmaybe"
    (folder / "train.tsv").write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError) as err:
        load_task(task_cfg("rte", tmp_path))
    msg = str(err.value)
    assert f"{folder / 'train.tsv'}: line 3: label 'maybe' is not in the label set of task rte" in msg
    assert "entailment, not_entailment" in msg and "\n" not in msg


def test_empty_split_names_the_file(tmp_path):
    folder = _copy_task(tmp_path, "WNLI")
    (folder / "dev.tsv").write_text("index\tsentence1\tsentence2\tlabel\n")
    with pytest.raises(DataError, match=rf"{folder / 'dev.tsv'}: split 'dev' of task wnli is empty"):
        load_task(task_cfg("wnli", tmp_path))


def test_unknown_task_is_a_config_error():
    with pytest.raises(ConfigError, match="task/glue/squad"):
        compose_config(["task=glue/squad"])
    with pytest.raises(ConfigError, match="task.data.task=squad is not a GLUE task"):
        GlueReader("squad", str(FIXTURES))


# -- Hugging Face nyu-mll/glue ------------------------------------------------------------------


def test_hf_source_is_selected_by_config():
    cfg = task_cfg("cola", FIXTURES, "task.data.source=hf")
    from hydra.utils import instantiate

    reader = instantiate(cfg.data)
    assert reader.source == "hf" and reader.hf_name == "nyu-mll/glue"
    # Offline here: the HF path is the one taken, and it fails with one line naming the dataset.
    with pytest.raises(DataError, match="nyu-mll/glue config cola"):
        load_task(cfg)


def test_hf_dataset_schema_is_converted():
    datasets = pytest.importorskip("datasets")
    dd = datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_dict(
                {"premise": ["a b", "c"], "hypothesis": ["d", "e f"], "label": [2, 0], "idx": [0, 1]}
            ),
            "validation_matched": datasets.Dataset.from_dict(
                {"premise": ["g"], "hypothesis": ["h"], "label": [1], "idx": [0]}
            ),
            "validation_mismatched": datasets.Dataset.from_dict(
                {"premise": ["i"], "hypothesis": ["j"], "label": [0], "idx": [0]}
            ),
            "test_matched": datasets.Dataset.from_dict(
                {"premise": ["k"], "hypothesis": ["l"], "label": [-1], "idx": [7]}
            ),
        }
    )
    data = task_data_from_hf(dd, "mnli")
    assert data.eval_splits == ["dev_matched", "dev_mismatched"] and data.test_splits == ["test_matched"]
    assert data.train.examples[0].texts == ("a b", "d") and data.train.examples[0].label == 2
    assert data.splits["test_matched"].examples[0].label is None and data.splits["test_matched"].examples[0].id == "7"
    # Class indices from HF map straight onto the config's label order (nyu-mll/glue's).
    spec_labels = OmegaConf.load(Path(__file__).resolve().parents[2] / "conf/task/glue/mnli.yaml").labels
    assert list(spec_labels) == ["entailment", "neutral", "contradiction"]


# -- the real files in ../shared/data/glue (row counts from MANIFEST.md) ------------------------

REAL_COUNTS = {
    "cola": {"train": 8551, "dev": 1043},
    "sst2": {"train": 67349, "dev": 872},
    "mrpc": {"train": 3668, "dev": 408},
    "rte": {"train": 2490, "dev": 277},
    "qnli": {"train": 320, "dev": 5463},
    "mnli": {"train": 240, "dev": 240},
}
REAL_LABEL_COUNTS = {  # (split, label) -> rows, from MANIFEST.md and the files
    "mrpc": {("train", "1"): 2474, ("train", "0"): 1194, ("dev", "1"): 279, ("dev", "0"): 129},
    "rte": {
        ("train", "entailment"): 1249,
        ("train", "not_entailment"): 1241,
        ("dev", "entailment"): 146,
        ("dev", "not_entailment"): 131,
    },
    "qnli": {("dev", "entailment"): 2702, ("dev", "not_entailment"): 2761},
    "mnli": {("dev", "entailment"): 80, ("dev", "neutral"): 80, ("dev", "contradiction"): 80},
    "cola": {("train", "1"): 6023, ("train", "0"): 2528},
    "sst2": {("dev", "1"): 444, ("dev", "0"): 428},
}


@pytest.mark.parametrize("task", list(REAL_COUNTS))
def test_real_glue_files(task, data_dir):
    loaded = load_task(task_cfg(task, data_dir / "glue"))
    assert {n: len(s) for n, s in loaded.data.splits.items()} == REAL_COUNTS[task]
    assert loaded.data.malformed_rows == 0
    labels = loaded.spec.labels
    for (split, label), n in REAL_LABEL_COUNTS[task].items():
        assert sum(labels[ex.label] == label for ex in loaded.data.splits[split].examples) == n
