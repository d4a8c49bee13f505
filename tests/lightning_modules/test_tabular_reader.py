"""The generic task: any local TSV/CSV/JSONL file with named text field(s) and a label/score."""

from __future__ import annotations

import json

import pytest

from lightning_modules.tasks.spec import load_task
from ptmlab.config import compose_config
from ptmlab.errors import ConfigError, DataError


def tabular(*overrides: str):
    return compose_config(["task=tabular", *overrides]).task


def write_csv(path, rows):
    path.write_text("\n".join(rows) + "\n")
    return path


def test_csv_pair_classification_with_inferred_labels(tmp_path):
    train = write_csv(
        tmp_path / "train.csv",
        [
            "premise,hypothesis,stars",
            '"Good, really good",fine,5',
            "bad,awful,1",
            "ok,meh,3",
            "great,superb,5",
            "poor,weak,10",
        ],
    )
    dev = write_csv(tmp_path / "dev.csv", ["premise,hypothesis,stars", "nice,good,5"])
    loaded = load_task(
        tabular(
            f"task.data.train={train}",
            f"task.data.dev={dev}",
            "task.data.text_fields=[premise,hypothesis]",
            "task.data.label_field=stars",
        )
    )
    assert loaded.spec.labels == ("1", "3", "5", "10")  # integers sort numerically
    assert loaded.num_labels == 4
    assert loaded.train.examples[0].texts == ("Good, really good", "fine")  # CSV quoting honoured
    assert [ex.label for ex in loaded.train.examples] == [2, 0, 1, 2, 3]


def test_tsv_regression_and_unlabelled_test(tmp_path):
    train = write_csv(tmp_path / "train.tsv", ["id\ttext\tscore", "a\tone\t0.5", "b\ttwo\t1.25"])
    dev = write_csv(tmp_path / "dev.tsv", ["id\ttext\tscore", "c\tthree\t2"])
    test = write_csv(tmp_path / "test.tsv", ["id\ttext", "d\tfour"])
    loaded = load_task(
        tabular(
            f"task.data.train={train}",
            f"task.data.dev={dev}",
            f"task.data.test={test}",
            "task.data.text_fields=[text]",
            "task.data.label_field=score",
            "task.data.id_field=id",
            "task.kind=regression",
            "task.num_labels=1",
            "task.metrics=[pearson,spearmanr]",
            "task.main_metric=pearson",
        )
    )
    assert [ex.label for ex in loaded.train.examples] == [0.5, 1.25]
    assert loaded.data.test_splits == ["test"] and loaded.test_splits[0].examples[0].id == "d"
    assert loaded.test_splits[0].examples[0].label is None


def test_jsonl_with_configured_labels(tmp_path):
    rows = [{"text": "good", "label": "pos"}, {"text": "bad", "label": "neg"}]
    (tmp_path / "train.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (tmp_path / "dev.jsonl").write_text(json.dumps({"text": "fine", "label": "pos"}) + "\n")
    loaded = load_task(
        tabular(
            f"task.data.train={tmp_path / 'train.jsonl'}",
            f"task.data.dev={tmp_path / 'dev.jsonl'}",
            "task.labels=[neg,pos]",
            "task.num_labels=2",
        )
    )
    assert [ex.label for ex in loaded.train.examples] == [1, 0]
    assert loaded.eval_splits[0].examples[0].texts == ("fine",)


def test_bad_input_names_file_line_and_key(tmp_path):
    (tmp_path / "train.jsonl").write_text('{"text": "a", "label": "pos"}\n{"txt": "b", "label": "neg"}\n')
    (tmp_path / "dev.jsonl").write_text('{"text": "a", "label": "pos"}\n')
    with pytest.raises(DataError, match=r"train\.jsonl:2: field 'text' \(task\.data\.text_fields\) missing"):
        load_task(tabular(f"task.data.train={tmp_path / 'train.jsonl'}", f"task.data.dev={tmp_path / 'dev.jsonl'}"))
    (tmp_path / "train.jsonl").write_text('{"text": "a", "label": "pos"}\n[1]\n')  # every JSONL reader's words
    with pytest.raises(DataError, match=r"train\.jsonl: line 2 is not a JSON object"):
        load_task(tabular(f"task.data.train={tmp_path / 'train.jsonl'}", f"task.data.dev={tmp_path / 'dev.jsonl'}"))
    (tmp_path / "train.jsonl").write_text('{"text": "a", "label": "pos"}\n{"text": "b", "label": "meh"}\n')
    with pytest.raises(DataError, match=r"train\.jsonl: line 2: label 'meh' is not in the label set"):
        load_task(
            tabular(
                f"task.data.train={tmp_path / 'train.jsonl'}",
                f"task.data.dev={tmp_path / 'dev.jsonl'}",
                "task.labels=[neg,pos]",
            )
        )
    train = write_csv(tmp_path / "train.csv", ["sentence,label", "x,1"])
    with pytest.raises(
        DataError, match=r"train\.csv: field 'text' \(task\.data\.text_fields\) missing from the header"
    ):
        load_task(tabular(f"task.data.train={train}", f"task.data.dev={train}"))
    good = write_csv(tmp_path / "good.csv", ["text,label", "x,1"])
    nolabel = write_csv(tmp_path / "nolabel.csv", ["text", "x"])
    with pytest.raises(DataError, match=r"nolabel\.csv: label field 'label' missing"):
        load_task(tabular(f"task.data.train={nolabel}", f"task.data.dev={good}"))
    with pytest.raises(DataError, match=f"data file not found: {tmp_path / 'nope.csv'}"):
        load_task(tabular(f"task.data.train={tmp_path / 'nope.csv'}", f"task.data.dev={good}"))
    with pytest.raises(ConfigError, match="task.num_labels=3 but the train split"):
        load_task(
            tabular(
                f"task.data.train={tmp_path / 'train.jsonl'}",
                f"task.data.dev={tmp_path / 'dev.jsonl'}",
                "task.num_labels=3",
            )
        )
