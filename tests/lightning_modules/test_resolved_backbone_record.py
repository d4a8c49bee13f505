"""Every run records what ran: a fine-tune of a referenced backbone (a pre-training run's folder,
as the worker resolves `backbone=job:<id>`, or `mlflow:<run>`) stores the backbone's model,
family, objective, tokenizer, corpus, size and source job, read from the export's manifest, in its
config.yaml, summary.json and MLflow params, and the compare page shows the demo's MLM and CLM
fine-tunes differing in model, objective and tokenizer; the defaults the reference replaced
(bert_tiny / mlm / wordpiece) are not shown as if they ran. Tiny models, a few steps."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
import yaml

from ptmlab.config import compose_config

WORDS = "the a man woman dog is not was in on park city good bad some people film great".split()


@pytest.fixture()
def one_torch_thread():
    """Intra-op threads spin against other processes on the shared 2-core CI machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def pretrain(tmp_path, monkeypatch, job_id: str, model: str, objective: str, tokenizer: str) -> dict:
    """`pretrain-<objective>` of conf/pipeline/demo.yaml, shrunk, run as platform job `job_id`."""
    from lightning_modules.stages.pretrain import run_pretrain
    from ptmlab.settings import get_settings

    corpus = tmp_path / "corpus"
    if not corpus.exists():
        corpus.mkdir()
        rng = random.Random(0)
        (corpus / "doc.txt").write_text("\n".join(" ".join(rng.choice(WORDS) for _ in range(8)) for _ in range(200)))
    monkeypatch.setenv("PTMLAB_JOB_ID", job_id)  # what the worker sets for the job it runs
    get_settings.cache_clear()
    cfg = compose_config(
        [
            "stage=pretrain",
            f"model={model}",
            f"objective={objective}",
            f"tokenizer={tokenizer}",
            "data=text_files",
            f"data.corpus.path={corpus}",
            "data.block_size=16",
            "data.batch_size=8",
            "tokenizer.vocab_size=80",
            "tokenizer.min_frequency=1",
            "trainer.max_steps=2",
            "trainer.val_check_interval=2",
            "trainer.limit_val_batches=1",
            "trainer.enable_progress_bar=false",
            "checkpoint_every_n_steps=0",
            f"+run_dir={tmp_path / f'pretrain-{objective}'}",
        ]
    )
    run_pretrain(cfg)
    monkeypatch.delenv("PTMLAB_JOB_ID")
    get_settings.cache_clear()
    return json.loads((tmp_path / f"pretrain-{objective}" / "summary.json").read_text())


def finetune(tmp_path, backbone: str, name: str) -> dict:
    """`finetune-<objective>`: the pipeline names no model, objective or tokenizer, so the
    composed config carries the defaults (bert_tiny, mlm, wordpiece) until the backbone resolves."""
    from lightning_modules.stages.finetune import run_finetune

    cfg = compose_config(
        [
            "stage=finetune",
            "task=demo/sentiment",
            f"backbone={backbone}",
            "task.max_train_samples=16",
            "task.max_eval_samples=16",
            "stage.batch_size=8",
            "stage.max_steps=2",
            "stage.epochs=1",
            "stage.pooling=mean",
            "stage.write_predictions=false",
            "trainer.enable_progress_bar=false",
            "checkpoint_every_n_steps=0",
            f"+run_dir={tmp_path / name}",
        ]
    )
    assert (cfg.model.name, cfg.objective.name, cfg.tokenizer.name) == ("bert_tiny", "mlm", "wordpiece")
    run_finetune(cfg)
    return json.loads((tmp_path / name / "summary.json").read_text())  # as the worker records it


def test_a_fine_tune_of_a_referenced_causal_decoder_records_gpt_tiny_clm_bpe(
    ptmlab_home, tmp_path, monkeypatch, one_torch_thread
):
    from mlflow.tracking import MlflowClient

    from lightning_modules.artifacts.backbone_reference import resolve_backbone
    from lightning_modules.runtime.stage_run import tracking_uri
    from ptmlab.db import dispose_engines, session_scope
    from ptmlab.db.models import Job
    from ptmlab.results import new_result
    from ptmlab.views import compare_view
    from ptmlab.views.jobs import resolved_job_config

    clm_pretrain = pretrain(tmp_path, monkeypatch, "2", "gpt_tiny", "clm", "bpe")
    pretrain(tmp_path, monkeypatch, "1", "bert_tiny", "mlm", "wordpiece")
    clm = finetune(tmp_path, str(tmp_path / "pretrain-clm"), "finetune-clm")
    mlm = finetune(tmp_path, str(tmp_path / "pretrain-mlm"), "finetune-mlm")

    # summary.json
    assert (clm["model"], clm["objective"], clm["tokenizer"], clm["family"]) == ("gpt_tiny", "clm", "bpe", "decoder")
    record = clm["backbone"]
    assert record["source_job"] == "2" and record["source_stage"] == "pretrain" and record["data"] == "text_files"
    assert record["source_run"] == clm_pretrain["mlflow_run_id"] and record["params"] == clm_pretrain["params"]
    assert record["vocab_size"] == clm_pretrain["vocab_size"]
    assert (mlm["model"], mlm["objective"], mlm["tokenizer"]) == ("bert_tiny", "mlm", "wordpiece")
    assert clm["config_hash"] != mlm["config_hash"]

    # the run folder's config.yaml (what the job page and the compare page read)
    config = yaml.safe_load((tmp_path / "finetune-clm" / "config.yaml").read_text())
    assert config["model"]["name"] == "gpt_tiny" and config["model"]["family"] == "decoder"
    assert config["model"]["backbone"]["_target_"].endswith("TransformerDecoder")
    assert config["objective"]["name"] == "clm" and config["tokenizer"]["name"] == "bpe"
    assert config["tokenizer"]["kind"] == "bpe" and config["data"]["name"] == "text_files"
    assert config["resolved_backbone"]["source_job"] == "2" and config["run_name"] == "finetune-gpt_tiny-clm"

    # MLflow params
    params = MlflowClient(tracking_uri=tracking_uri(compose_config([]))).get_run(clm["mlflow_run_id"]).data.params
    assert (params["model.name"], params["objective.name"], params["tokenizer.name"]) == ("gpt_tiny", "clm", "bpe")
    assert params["model.family"] == "decoder" and params["resolved_backbone.source_job"] == "2"
    assert params["resolved_backbone.params"] == str(clm_pretrain["params"])

    # the compare page and the job page, from the platform's results table
    url = f"sqlite:///{tmp_path / 'platform.db'}"
    with session_scope(url) as s:
        rows = [new_result(mlm), new_result(clm)]
        s.add_all(rows)
        s.flush()
        view = compare_view(s, [r.id for r in rows])
    for key in ("model.name", "objective.name", "tokenizer.name", "model.family", "resolved_backbone.source_job"):
        assert key in view["differing"], key
    assert [view["configs"][str(r.id)]["model.name"] for r in rows] == ["bert_tiny", "gpt_tiny"]
    assert [view["configs"][str(r.id)]["tokenizer.name"] for r in rows] == ["wordpiece", "bpe"]
    job_config, source = resolved_job_config(Job(stage="finetune", run_dir=str(tmp_path / "finetune-clm")))
    assert source == "run folder" and job_config["objective"]["name"] == "clm"
    dispose_engines()

    # a probe of the same export (conf/pipeline/demo.yaml `probe-clm`), as built before its run opens
    from lightning_modules.stages.probe import build_probe

    ud = Path(__file__).resolve().parents[2] / "data" / "demo" / "ud"
    probe_cfg = compose_config(
        [
            "stage=probe",
            "probe=upos",
            f"backbone={tmp_path / 'pretrain-clm'}",
            f"probe.data.train={ud / 'train.conllu'}",
            f"probe.data.eval={ud / 'dev.conllu'}",
        ]
    )
    build_probe(probe_cfg)
    assert (probe_cfg.model.name, probe_cfg.objective.name, probe_cfg.tokenizer.name) == ("gpt_tiny", "clm", "bpe")
    assert probe_cfg.resolved_backbone.source_job == "2"

    # `backbone=mlflow:<run>`: the export artifact carries the same manifest
    cfg = compose_config(["stage=finetune", "task=glue/sst2", f"backbone=mlflow:{clm_pretrain['mlflow_run_id']}"])
    resolved = resolve_backbone(cfg, tracking_uri(cfg))
    assert (resolved.record["model"], resolved.record["objective"], resolved.record["tokenizer"]) == (
        "gpt_tiny",
        "clm",
        "bpe",
    )
    assert resolved.record["source_job"] == "2" and resolved.configs["objective"]["name"] == "clm"


def test_a_fresh_backbone_records_no_pre_training(ptmlab_home, tmp_path, one_torch_thread):
    """`backbone=null` builds bert_tiny here: its model, tokenizer and corpus ran, no objective did."""
    from lightning_modules.artifacts.backbone_reference import record_backbone, resolve_backbone
    from lightning_modules.runtime.stage_run import tracking_uri

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "doc.txt").write_text("\n".join(" ".join(WORDS[i:] + WORDS[:i]) for i in range(len(WORDS))) * 5)
    cfg = compose_config(
        [
            "stage=finetune",
            "task=glue/sst2",
            "data=text_files",
            f"data.corpus.path={corpus}",
            "tokenizer.vocab_size=60",
            "tokenizer.min_frequency=1",
        ]
    )
    resolved = resolve_backbone(cfg, tracking_uri(cfg))
    record_backbone(cfg, resolved)
    assert (cfg.model.name, cfg.objective.name, cfg.tokenizer.name, cfg.data.name) == (
        "bert_tiny",
        "none",
        "wordpiece",
        "text_files",
    )
    assert cfg.model.backbone.vocab_size == len(resolved.tokenizer)
    assert cfg.resolved_backbone.source_stage == "none" and cfg.resolved_backbone.reference == "random"


def test_a_queued_fine_tune_of_a_job_does_not_show_the_defaults_its_backbone_replaces():
    """Before it runs, the job page composes the config from the overrides: the model, objective,
    tokenizer and corpus groups say they come from the backbone, not bert_tiny / mlm / wordpiece."""
    from ptmlab.db.models import Job
    from ptmlab.views.jobs import resolved_job_config

    job = Job(stage="finetune", seed=1, overrides=["task=demo/sentiment", "backbone=job:pretrain-clm"])
    config, source = resolved_job_config(job)
    assert source == "composed from the overrides (not yet run)" and config["task"]["name"] == "sentiment"
    for group in ("model", "objective", "tokenizer", "data"):
        assert config[group] == {"name": "from backbone=job:pretrain-clm (recorded when the job runs)"}, group
    fresh, _ = resolved_job_config(Job(stage="finetune", seed=1, overrides=["task=demo/sentiment"]))
    assert fresh["model"]["name"] == "bert_tiny"  # backbone=null: the model group is what runs
