"""Multi-process training through the real entry point: `trainer=ddp` on two CPU processes
(Lightning's DDP over gloo starts the second copy of `python -m ptmlab.run`), and `trainer=fsdp`
refused on CPU with one line before any work."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

WORDS = "the a cat dog sat on mat ran far near house tree big small red blue quick lazy fox jumps".split()

DDP = ["trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2", "trainer.precision=32-true"]


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory) -> Path:
    rng = random.Random(0)
    folder = tmp_path_factory.mktemp("corpus")
    for f in range(2):
        lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 12))) for _ in range(400)]
        (folder / f"doc{f}.txt").write_text("\n".join(lines) + "\n")
    return folder


def run_entry(home: Path, overrides: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PTMLAB_HOME": str(home)}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run(
        [sys.executable, "-m", "ptmlab.run", *overrides], capture_output=True, text=True, env=env, timeout=300
    )


def mlflow_client(home: Path):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=f"sqlite:///{home / 'mlflow.db'}")


def ddp_overrides(corpus: Path, run_dir: Path, steps: int) -> list[str]:
    return [
        "stage=pretrain",
        "model=bert_tiny",
        "objective=mlm",
        "data=text_files",
        f"data.corpus.path={corpus}",
        "data.block_size=32",
        "data.batch_size=8",
        "tokenizer.vocab_size=90",
        "tokenizer.min_frequency=1",
        *DDP,
        f"trainer.max_steps={steps}",
        "trainer.val_check_interval=3",
        "trainer.limit_val_batches=2",
        "trainer.log_every_n_steps=2",
        "trainer.enable_progress_bar=false",
        "checkpoint_every_n_steps=3",
        f"hydra.run.dir={run_dir}",
    ]


@pytest.mark.slow
def test_ddp_two_cpu_processes_train_in_sync_log_once_and_resume(ptmlab_home, corpus_dir, tmp_path):
    run_dir = tmp_path / "run"
    proc = run_entry(ptmlab_home, ddp_overrides(corpus_dir, run_dir, 6))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Starting with 2 processes" in proc.stdout + proc.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["steps"] == 6
    # both replicas hold identical weights at the end (a digest gathered from each rank)
    assert len(summary["replica_weights"]) == 2
    assert summary["replica_weights"][0] == summary["replica_weights"][1]
    speed = summary["throughput"]
    assert speed["world_size"] == 2 and speed["tokens_per_s"] > 0 and speed["padding_fraction"] == 0.0
    assert speed["mfu"] is None  # a CPU with no trainer.peak_flops: no made-up peak
    # every rank's tokens: 6 steps × 2 ranks × 8 blocks × 32 tokens
    assert summary["tokens_seen"] == 6 * 2 * 8 * 32

    # only rank 0 logged: one MLflow run in the experiment, and it has the metrics
    client = mlflow_client(ptmlab_home)
    experiment = client.get_experiment_by_name("ptmlab-pretrain")
    runs = client.search_runs([experiment.experiment_id])
    assert [r.info.run_id for r in runs] == [summary["mlflow_run_id"]]
    assert runs[0].info.status == "FINISHED"
    assert {"train/loss", "train/tokens_per_s", "train/samples_per_s", "val/loss"} <= set(runs[0].data.metrics)

    # resume: both ranks continue from last.ckpt into the same MLflow run
    proc = run_entry(ptmlab_home, [*ddp_overrides(corpus_dir, run_dir, 9), "resume=true"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    resumed = json.loads((run_dir / "summary.json").read_text())
    assert resumed["steps"] == 9 and resumed["mlflow_run_id"] == summary["mlflow_run_id"]
    assert resumed["replica_weights"][0] == resumed["replica_weights"][1] != summary["replica_weights"][0]
    assert len(client.search_runs([experiment.experiment_id])) == 1
    steps = sorted(m.step for m in client.get_metric_history(summary["mlflow_run_id"], "train/loss"))
    assert steps[-1] >= 7 and steps == sorted(set(steps))  # continued, not restarted at 0


def test_fsdp_on_cpu_is_refused_in_one_line(ptmlab_home, tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ptmlab.run",
            "stage=pretrain",
            "trainer=fsdp",
            "trainer.accelerator=cpu",
            f"hydra.run.dir={tmp_path / 'run'}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "fsdp" in lines[0] and "GPU" in lines[0], proc.stderr
    assert not (tmp_path / "run").exists()


def test_stages_that_need_whole_splits_refuse_several_processes(ptmlab_home, tmp_path):
    """finetune/multitask compute metrics and predictions over whole splits on one process:
    a two-process trainer is refused with a message naming the setting, not silently half-scored."""
    from lightning_modules.runtime.stage_run import StageRun
    from ptmlab.config import compose_config
    from ptmlab.contracts import ConfigError

    cfg = compose_config(["stage=finetune", "task=glue/sst2", *DDP, f"+run_dir={tmp_path / 'run'}"])
    with pytest.raises(ConfigError, match="trainer.devices=1"):
        with StageRun(cfg) as run:
            run.build_trainer(distributed=False)
    assert run.build_trainer(distributed=True).world_size == 2  # pretrain's kind of stage may
