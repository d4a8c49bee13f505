"""The realistic check of the finetune stage: the packaged MiniLM-L6 fine-tuned on the first
8,000 rows of SST-2 train (one epoch, batch 32, CPU, AdamW, 10% warm-up, max length 64, mean
pooling, length-grouped batches), scored on the full SST-2 dev set (872 rows), through the real
entry point (the recipe: sst2_recipe.py). A plain PyTorch loop over the same batches
(bench/threshold_reference.py) reaches 0.844 and ptmlab 0.834 (0.834 / 0.833 over the shuffled
length-grouped order before transformers' LengthGroupedSampler; 0.84 with random, unsorted
batches), so ptmlab must reach 0.82. Adapters and the other delta-tuning modes: test_delta_tuning_minilm.py."""

from __future__ import annotations

import json

import pytest


@pytest.mark.slow
@pytest.mark.threshold
@pytest.mark.timeout(2400)
def test_minilm_full_finetuning_reaches_082_on_sst2_dev(sst2_teacher):
    """Trained once per session (conftest.py): the compression tests use the same model."""
    summary = sst2_teacher.summary
    assert summary["task"] == "sst2" and summary["adaptation"] == "full"
    assert summary["trainable_params"] == summary["total_params"]
    assert summary["steps"] == 250  # 8,000 rows / 32, one epoch
    print(f"SST-2 dev accuracy, full fine-tuning: {summary['main_score']:.4f} in {summary['train_time_s']:.0f} s")
    assert summary["main_score"] >= 0.82
    dev_predictions = (sst2_teacher.run_dir / "predictions" / "dev.tsv").read_text().splitlines()
    assert len(dev_predictions) == 872 + 1  # header + every dev row
    # what it got wrong, stored with the run: rows gold, columns predicted, the accuracy on its diagonal
    confusion = json.loads((sst2_teacher.run_dir / "predictions" / "confusion.json").read_text())
    assert summary["confusion"] == confusion and confusion["labels"] == ["0", "1"]
    matrix = confusion["matrix"]
    assert sum(map(sum, matrix)) == 872 and confusion["errors"] == matrix[0][1] + matrix[1][0]
    assert (matrix[0][0] + matrix[1][1]) / 872 == pytest.approx(summary["main_score"], abs=1e-6)
    assert [row["support"] for row in confusion["per_class"]] == [sum(matrix[0]), sum(matrix[1])]
    wrong = confusion["misclassified"]
    assert len(wrong) == 20 and all(m["gold"] != m["predicted"] and m["text"] for m in wrong)
    assert [m["score"] for m in wrong] == sorted((m["score"] for m in wrong), reverse=True)
    # the training rows' majority class on dev: one class's share of the 872 rows, far below the run
    baseline = summary["baseline"]
    assert baseline["kind"] == "majority_class" and baseline["metric"] == "accuracy"
    assert baseline["value"] * 872 in (pytest.approx(sum(matrix[0])), pytest.approx(sum(matrix[1])))
    assert summary["main_score"] > baseline["value"] + 0.2
    # the flat resolved config of what ran
    assert summary["hparams"]["model.name"] == "minilm" and summary["hparams"]["stage.batch_size"] == 32
    assert summary["hparams"]["task.max_train_samples"] == 8000 and "paths.data_dir" not in summary["hparams"]
