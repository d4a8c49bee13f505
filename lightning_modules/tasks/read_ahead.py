"""A stage's data read before the training stack is imported (`stage.preflight`, ptmlab.run).

`python -m ptmlab.run` imports Lightning, Transformers and MLflow (~10 s here) before a stage
reads a byte of its data, so a ragged CoNLL row or a missing corpus used to cost that long to
report. A stage config that names a preflight has its inputs read torch-light first: a bad file
fails in about 2 s, before the tracking store is opened. What the
preflight read is handed to the stage's own `load_task` (tasks/spec.py) rather than read twice.
"""

from __future__ import annotations

from omegaconf import DictConfig

from lightning_modules.tasks.spec import read_task_ahead
from ptmlab.contracts.task_checks import multitask_task_nodes


def task_data(cfg: DictConfig) -> None:
    """stage=finetune: the task's splits, read and label-checked (the stage takes them). Without a
    task there is nothing to read: the stage itself says what is missing."""
    if cfg.get("task") is not None:
        read_task_ahead(cfg.task)


def each_task_data(cfg: DictConfig) -> None:
    """stage=multitask: every task of `stage.tasks`, read and label-checked."""
    for node in multitask_task_nodes(cfg).values():
        read_task_ahead(node)
