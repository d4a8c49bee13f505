"""The summary.json fields every run that trains a task model (finetune, multitask) reports."""

from __future__ import annotations

from lightning_modules.adaptation.base import count_trainable
from lightning_modules.heads.pooling import PooledEncoder
from lightning_modules.runtime.throughput import ThroughputMonitor


def training_numbers(model: PooledEncoder, module, trainer) -> dict:
    """The summary.json fields every run that trains a task model reports."""
    return {
        "trainable_params": count_trainable(model),
        "total_params": sum(p.numel() for p in model.parameters()),
        "train_time_s": round(module.train_time_s, 3),
        "steps": int(trainer.global_step),
        **throughput_numbers(trainer),
    }


def throughput_numbers(trainer) -> dict:
    """{"throughput": ...} from the run's ThroughputMonitor (runtime/throughput.py), if it has one."""
    for callback in trainer.callbacks:
        if isinstance(callback, ThroughputMonitor):
            return {"throughput": callback.summary()}
    return {}
