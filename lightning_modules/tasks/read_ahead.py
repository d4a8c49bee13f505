"""A stage's data read before the training stack is imported (`stage.preflight`, ptmlab.run).

`python -m ptmlab.run` imports Lightning, Transformers and MLflow (~10 s here) before a stage
reads a byte of its data, so a ragged CoNLL row or a missing corpus used to cost that long to
report. A stage config that names a preflight has its inputs read torch-light first: a bad file
fails in about 2 s, before the tracking store is opened. What the
preflight read is handed to the stage's own `load_task` (tasks/spec.py) and, for a backbone built
here, `load_corpus_tokenizer` (data/corpus_tokenizer.py) rather than read twice.
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from lightning_modules.data.corpus_tokenizer import CorpusTokenizer, read_corpus_tokenizer_ahead
from lightning_modules.tasks.spec import read_task_ahead
from ptmlab.contracts.decoding import DecodingSettings
from ptmlab.contracts.task_checks import multitask_task_nodes


def builds_its_backbone(cfg: DictConfig) -> bool:
    """The backbone is built from `model` with a tokenizer trained on `data` (or `tokenizer.path`),
    as artifacts/backbone_reference.py `_fresh_from_model_cfg` does: no reference, no checkpoint."""
    return (
        OmegaConf.select(cfg, "backbone", default=None) in (None, "random")
        and OmegaConf.select(cfg, "model.name_or_path", default=None) is None
    )


def corpus_and_tokenizer(cfg: DictConfig) -> CorpusTokenizer | None:
    """A backbone built here: its corpus and tokenizer; a beam wider than that vocabulary is refused
    (the stage checks it again for a referenced backbone, whose tokenizer loads with it)."""
    if not builds_its_backbone(cfg):
        return None
    read = read_corpus_tokenizer_ahead(cfg.data, cfg.tokenizer, cfg.paths.cache_dir)
    tokenizer = read.tokenizer
    if OmegaConf.select(cfg, "task.kind", default=None) == "generation":
        node = cfg.task.get("generation")
        decoding = DecodingSettings.from_dict(None if node is None else OmegaConf.to_container(node, resolve=True))
        decoding.check(vocab_size=len(tokenizer))
    return read


def task_data(cfg: DictConfig) -> CorpusTokenizer | None:
    """stage=finetune: the task's splits, read and label-checked (the stage takes them). Without a
    task there is nothing to read: the stage itself says what is missing."""
    if cfg.get("task") is None:
        return None
    read_task_ahead(cfg.task)
    return corpus_and_tokenizer(cfg)


def each_task_data(cfg: DictConfig) -> None:
    """stage=multitask: every task of `stage.tasks`, read and label-checked."""
    for node in multitask_task_nodes(cfg).values():
        read_task_ahead(node)
    corpus_and_tokenizer(cfg)
