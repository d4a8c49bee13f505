"""stage=pretrain end to end through the real entry point (`python -m ptmlab.run`): MLflow run
with metrics, params and provenance, summary.json, export; resume (in process, into the same
MLflow run); and bad input that fails before any work with one line and leaves earlier runs intact."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

WORDS = "the a cat dog sat on mat ran far near house tree big small red blue quick lazy fox jumps".split()


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory) -> Path:
    rng = random.Random(0)
    folder = tmp_path_factory.mktemp("corpus")
    for f in range(2):
        lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 12))) for _ in range(400)]
        (folder / f"doc{f}.txt").write_text("\n".join(lines) + "\n")
    return folder


def base_overrides(corpus_dir: Path, steps: int) -> list[str]:
    return [
        "stage=pretrain",
        "model=bert_tiny",
        "objective=mlm",
        "data=text_files",
        f"data.corpus.path={corpus_dir}",
        "data.block_size=32",
        "data.batch_size=16",
        "tokenizer.vocab_size=90",
        "tokenizer.min_frequency=1",
        f"trainer.max_steps={steps}",
        "trainer.val_check_interval=10",
        "trainer.limit_val_batches=2",
        "trainer.log_every_n_steps=2",
        "trainer.enable_progress_bar=false",
        "checkpoint_every_n_steps=10",
        "optimizer.lr=2e-3",
    ]


def run_entry(home: Path, overrides: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PTMLAB_HOME": str(home)}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run(
        [sys.executable, "-m", "ptmlab.run", *overrides], capture_output=True, text=True, env=env, timeout=600
    )


def mlflow_client(home: Path):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=f"sqlite:///{home / 'mlflow.db'}")


def loss_history(client, run_id: str, key: str = "train/loss") -> list[float]:
    return [m.value for m in sorted(client.get_metric_history(run_id, key), key=lambda m: m.step)]


@pytest.mark.slow
def test_pretrain_logs_everything_and_resumes(ptmlab_home, corpus_dir, tmp_path):
    run_dir = tmp_path / "run"
    proc = run_entry(ptmlab_home, [*base_overrides(corpus_dir, 30), f"hydra.run.dir={run_dir}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    # A clean log (ptmlab.joblog): a header naming the config hash and run folder, each line once,
    # no advertisement, no dependency deprecation warning, no progress bars.
    output = proc.stdout + proc.stderr
    assert re.match(
        rf"ptmlab\.run: stage=pretrain config [0-9a-f]{{12}} run folder {re.escape(str(run_dir))}\n", output
    )
    assert output.count("GPU available") == 1 and output.count("max_steps=30` reached") == 1, output
    for noise in ("Tip", "LeafSpec", "Writing model shards", "Creating initial MLflow database tables", "\n\n"):
        assert noise not in output, (noise, output)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["steps"] == 30 and summary["objective"] == "mlm"
    client = mlflow_client(ptmlab_home)
    run = client.get_run(summary["mlflow_run_id"])
    assert run.info.status == "FINISHED"
    for key in ("train/loss", "val/loss", "val/perplexity", "train/lr", "train/tokens_per_s"):
        assert key in run.data.metrics, key
    history = loss_history(client, run.info.run_id)
    assert history[-1] < history[0]
    assert run.data.params["model.backbone.hidden_size"] == "128"
    assert run.data.tags["mlflow.source.git.commit"]
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"config.yaml", "provenance", "export", "summary.json"} <= artifacts
    provenance = {a.path for a in client.list_artifacts(run.info.run_id, "provenance")}
    assert {"provenance/packages.json", "provenance/data_hashes.json"} <= provenance
    assert (run_dir / "export" / "hf" / "config.json").exists() or (run_dir / "export" / "backbone.pt").exists()
    # progress.json, what the worker shows while a job runs: the last state of the fit.
    progress = json.loads((run_dir / "progress.json").read_text())
    assert (progress["step"], progress["total_steps"]) == (30, 30)
    assert progress["history"][-1]["step"] == 30 and "train/loss" in progress["metrics"]

    # Continue the same run to 50 steps: same MLflow run, steps pick up where they stopped. In
    # process (a second `python -m ptmlab.run` costs its imports; test_distributed.py resumes
    # through the entry point, on two processes).
    from lightning_modules.stages.pretrain import run_pretrain
    from ptmlab.config import compose_config

    run_pretrain(compose_config([*base_overrides(corpus_dir, 50), f"+run_dir={run_dir}", "resume=true"]))
    resumed = json.loads((run_dir / "summary.json").read_text())
    assert resumed["mlflow_run_id"] == summary["mlflow_run_id"]
    assert resumed["steps"] == 50
    steps = [m.step for m in client.get_metric_history(run.info.run_id, "train/loss")]
    assert max(steps) > 30 and len(steps) == len(set(steps))  # no step logged twice


BAD_INPUT = {
    "missing corpus": (["data.corpus.path=/nonexistent/corpus"], "/nonexistent/corpus"),
    "block larger than the corpus": (
        ["data.block_size=100000", "model.backbone.max_position_embeddings=100000"],
        "data.block_size=100000",
    ),
    "vocabulary larger than the corpus": (["tokenizer.vocab_size=50000"], "tokenizer.vocab_size=50000"),
}


def test_bad_input_fails_before_work_and_loses_nothing(ptmlab_home, corpus_dir):
    """Through the entry point once (each `python -m ptmlab.run` costs its imports); the preflight
    builds the examples before the training stack loads."""
    sentinel = ptmlab_home / "runs" / "earlier" / "summary.json"
    sentinel.parent.mkdir(parents=True)
    sentinel.write_text('{"kept": true}')
    extra, needle = BAD_INPUT["block larger than the corpus"]
    proc = run_entry(ptmlab_home, [*base_overrides(corpus_dir, 5), *extra])
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error[")]
    assert len(lines) == 1 and needle in lines[0], proc.stderr[-2000:]
    assert json.loads(sentinel.read_text()) == {"kept": True}
    if (ptmlab_home / "mlflow.db").exists():  # no MLflow run was opened for the failed job
        client = mlflow_client(ptmlab_home)
        assert all(not client.search_runs([e.experiment_id]) for e in client.search_experiments())


@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_the_preflight_refuses_bad_input(case, ptmlab_home, corpus_dir, monkeypatch):
    """What ptmlab.run calls before the stage (`stage.preflight`), in process: every case."""
    from lightning_modules.data.read_ahead import corpus_and_tokenizer
    from ptmlab.config import compose_config
    from ptmlab.run import ptmlab_error_in_chain

    extra, needle = BAD_INPUT[case]
    cfg = compose_config([*base_overrides(corpus_dir, 5), *extra])
    assert cfg.stage.preflight == "lightning_modules.data.read_ahead.corpus_and_tokenizer"
    with pytest.raises(Exception) as raised:
        corpus_and_tokenizer(cfg)
    # as ptmlab.run reports it: the user's error, not Hydra's instantiate wrapper around it
    assert needle in str(ptmlab_error_in_chain(raised.value))


def test_the_preflight_hands_corpus_tokenizer_and_examples_to_the_stage(ptmlab_home, corpus_dir, monkeypatch):
    """What the preflight read (its return value, which ptmlab.run hands to run_pretrain), the
    stage's datamodule takes; the examples it built are the datamodule's cache hit, not built again."""
    from lightning_modules.data.pretrain_datamodule import PretrainDataModule
    from lightning_modules.data.pretrain_examples import examples_cache_path
    from lightning_modules.data.read_ahead import corpus_and_tokenizer
    from ptmlab.config import compose_config

    cfg = compose_config(base_overrides(corpus_dir, 5))
    ahead = corpus_and_tokenizer(cfg)
    cached = examples_cache_path(cfg.data, ahead.tokenizer, ahead.fingerprint, cfg.paths.cache_dir)
    built = cached.stat().st_mtime_ns
    datamodule = PretrainDataModule(cfg.data, cfg.tokenizer, cfg.paths.cache_dir, seed=0, corpus_tokenizer=ahead)
    assert datamodule.tokenizer is ahead.tokenizer and datamodule.corpus is ahead.corpus
    alone = PretrainDataModule(cfg.data, cfg.tokenizer, cfg.paths.cache_dir, seed=0)  # no preflight: reads itself
    assert alone.corpus is not ahead.corpus and alone.fingerprint == ahead.fingerprint
    datamodule.setup()
    assert cached.stat().st_mtime_ns == built and len(datamodule.train_set) > 0 and len(datamodule.val_set) > 0
