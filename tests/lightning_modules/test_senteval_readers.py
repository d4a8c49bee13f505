"""SentEval readers (label<TAB>sentence, no header) on a fixture and on the shared data."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from lightning_modules.data.senteval import SentEvalReader
from lightning_modules.tasks.spec import load_task
from ptmlab.config import compose_config
from ptmlab.errors import ConfigError, DataError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "senteval"


def test_fixture_first_line_is_data_and_a_bad_line_is_counted(caplog):
    with caplog.at_level(logging.WARNING):
        data = SentEvalReader("MR", str(FIXTURES)).read()
    train = data.train
    assert len(train) == 4 and train.examples[0].label == "1"
    assert train.examples[0].texts == ("a compelling pre wwii drama with vivid characters and a warm , moving message",)
    assert train.malformed_rows == 1 and train.malformed_row_numbers == [4]
    assert any("skipped 1 malformed row(s)" in r.getMessage() for r in caplog.records)
    assert data.eval_splits == ["dev"] and data.splits["dev"].examples[0].texts == (
        "it 's a charming and often affecting journey .",
    )


def test_errors_name_the_task_or_path(tmp_path):
    with pytest.raises(ConfigError, match="task.data.task=SST is not a SentEval task"):
        SentEvalReader("SST", str(FIXTURES))
    with pytest.raises(DataError, match=f"SentEval file not found: {tmp_path / 'CR' / 'train.tsv'}"):
        SentEvalReader("CR", str(tmp_path)).read()
    (tmp_path / "MR").mkdir()
    (tmp_path / "MR" / "train.tsv").write_text("1\tgood\n2\tbad\n")
    (tmp_path / "MR" / "dev.tsv").write_text("1\tgood\n")
    cfg = compose_config(["task=senteval/mr", f"task.data.data_dir={tmp_path}"]).task
    with pytest.raises(DataError, match=r"train\.tsv: line 2: label '2' is not in the label set of task mr"):
        load_task(cfg)


REAL = {"mr": (8529, 2133, 1111), "cr": (3016, 755, 467), "subj": (8000, 2000, 1012), "mpqa": (8482, 2121, 681)}


@pytest.mark.parametrize("task", list(REAL))
def test_real_senteval_files(task, data_dir):
    loaded = load_task(compose_config([f"task=senteval/{task}"]).task)
    n_train, n_dev, dev_positive = REAL[task]
    assert len(loaded.train) == n_train and len(loaded.eval_splits[0]) == n_dev
    assert loaded.data.malformed_rows == 0
    assert sum(ex.label for ex in loaded.eval_splits[0].examples) == dev_positive
