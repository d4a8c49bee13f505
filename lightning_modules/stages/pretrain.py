"""stage=pretrain: model (architecture) + objective(s) + corpus → checkpoint + tokenizer, exported
in Hugging Face format too (see lightning_modules.artifacts.backbone_export)."""

from __future__ import annotations

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from lightning_modules.artifacts.backbone_export import export_backbone, export_lm_head, write_backbone_manifest
from lightning_modules.data.corpus_tokenizer import CorpusTokenizer
from lightning_modules.data.pretrain_datamodule import PretrainDataModule
from lightning_modules.objectives.parts import build_objectives
from lightning_modules.runtime.stage_run import StageRun
from lightning_modules.stages.pretrain_module import PretrainModule, count_parameters
from ptmlab.contracts import ConfigError
from ptmlab.contracts.summaries import PretrainSummary


def build_backbone(model_cfg: DictConfig, vocab_size: int):
    kwargs = {"vocab_size": vocab_size} if "vocab_size" in model_cfg.backbone else {}
    return instantiate(model_cfg.backbone, **kwargs)


def build_pretrain_module(cfg: DictConfig, datamodule: PretrainDataModule) -> PretrainModule:
    tokenizer = datamodule.tokenizer
    backbone = build_backbone(cfg.model, len(tokenizer))
    objectives, weights = build_objectives(cfg.objective, backbone, tokenizer)
    max_pos = OmegaConf.select(cfg, "model.backbone.max_position_embeddings", default=None)
    if max_pos is not None and int(cfg.data.block_size) > int(max_pos):
        raise ConfigError(
            f"data.block_size={cfg.data.block_size} exceeds model.backbone.max_position_embeddings={max_pos}"
        )
    return PretrainModule(
        backbone,
        objectives,
        weights,
        cfg.optimizer,
        cfg.get("scheduler"),
        total_steps=int(cfg.trainer.max_steps),
        seq_len=int(cfg.data.block_size),
    )


def run_pretrain(cfg: DictConfig, read_ahead: CorpusTokenizer | None = None) -> dict:
    """`read_ahead`: the corpus and tokenizer the preflight read (data/read_ahead.py); None: read here."""
    # Everything that can fail on bad input (paths, corpus size, vocabulary) runs before the
    # MLflow run is opened and before training starts.
    import lightning.pytorch as pl

    pl.seed_everything(int(cfg.seed), workers=True, verbose=False)  # initial weights follow cfg.seed
    datamodule = PretrainDataModule(
        cfg.data, cfg.tokenizer, cfg.paths.cache_dir, seed=int(cfg.seed), corpus_tokenizer=read_ahead
    )
    datamodule.setup()
    module = build_pretrain_module(cfg, datamodule)

    with StageRun(cfg) as run:
        run.log_data_files(datamodule.files())
        trainer = run.build_trainer(flops_per_token=module.training_flops_per_token)
        trainer.fit(module, datamodule=datamodule, ckpt_path=run.resume_checkpoint)
        speed = run.throughput.summary(trainer.strategy)  # a collective under DDP: every rank
        if not run.is_global_zero:  # the other ranks of a DDP job: rank 0 exports and reports
            return {}
        metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if v.numel() == 1}
        export_dir = export_backbone(
            module.backbone,
            cfg.model,
            datamodule.tokenizer,
            run.run_dir / "export",
            vocab_size=len(datamodule.tokenizer),
        )
        export_lm_head(dict(module.objectives), module.backbone, export_dir)  # for prompt-based fine-tuning
        # What a later fine-tune/probe of this export records as its backbone (not its own defaults).
        write_backbone_manifest(
            export_dir,
            {
                "model": str(cfg.model.name),
                "family": str(cfg.model.family),
                "objective": str(cfg.objective.name),
                "tokenizer": str(cfg.tokenizer.name),
                "data": str(cfg.data.name),
                "params": count_parameters(module.backbone),
                "vocab_size": len(datamodule.tokenizer),
                "source_stage": "pretrain",
                "source_job": OmegaConf.select(cfg, "tracking.job_id", default=None),
                "source_run": run.run_id,
                "source_run_dir": str(run.run_dir),
                "seed": int(cfg.seed),
                "configs": {
                    group: OmegaConf.to_container(cfg[group], resolve=True)
                    for group in ("objective", "tokenizer", "data")
                },
            },
        )
        run.log_artifacts(export_dir, "export")
        summary = run.summary(
            PretrainSummary,
            model=str(cfg.model.name),
            family=str(cfg.model.family),
            objective=str(cfg.objective.name),
            data=str(cfg.data.name),
            steps=int(trainer.global_step),
            train_loss=module.last_train_loss,
            val_loss=metrics.get("val/loss"),
            val_perplexity=metrics.get("val/perplexity"),
            tokens_seen=module.total_tokens_seen,
            train_flops=module.total_tokens_seen * module.flops_per_token,
            params=count_parameters(module.backbone),
            vocab_size=len(datamodule.tokenizer),
            checkpoint=run.checkpoint_dir / "last.ckpt",
            export_dir=export_dir,
            throughput=speed,
            replica_weights=module.replica_digests,
        )
        run.write_summary(summary)
    return summary.model_dump(mode="json", exclude_unset=True)
