"""stage=finetune's preflight (`stage.preflight`, ptmlab.run): the task data and the corpus and
tokenizer of a backbone built here (tasks/read_ahead.py), then what the adaptation can refuse from
the backbone's layers alone (`Adaptation.check_backbone`: LoRA's target_modules and rank), asked
of that backbone built on the meta device: no weights and no training stack, so a LoRA setting no
layer allows fails in seconds. Returns what it read (`ReadAhead`), for the stage entry."""

from __future__ import annotations

from omegaconf import DictConfig

from lightning_modules.tasks.read_ahead import ReadAhead, task_data


def task_data_and_adaptation(cfg: DictConfig) -> ReadAhead:
    read = task_data(cfg)
    if read.corpus_tokenizer is None or cfg.get("adaptation") is None:
        return read  # a referenced backbone's layers are known once it loads: the stage checks them
    # torch and the adaptation modes imported only here: a bad task file above fails without them
    import torch
    from hydra.utils import get_class, instantiate

    from lightning_modules.adaptation.base import Adaptation
    from lightning_modules.adaptation.from_config import build_adaptation

    mode = get_class(str(cfg.adaptation._target_))
    if not (issubclass(mode, Adaptation) and mode.checks_backbone_layers):
        return read  # no mode built here that has nothing to ask of the layers: the stage builds it
    adaptation = build_adaptation(cfg.adaptation)
    try:
        with torch.device("meta"):  # the layers' names and shapes only, as the stage builds them
            backbone = instantiate(cfg.model.backbone, vocab_size=len(read.corpus_tokenizer.tokenizer))
    except Exception:
        return read  # the stage builds it for real and reports what is wrong with it
    adaptation.check_backbone(backbone)
    return read
