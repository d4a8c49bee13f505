"""A stage's data read before the training stack is imported (`stage.preflight`, ptmlab.run).

`python -m ptmlab.run` imports Lightning, Transformers and MLflow (~10 s here) before a stage
reads a byte of its data, so a ragged CoNLL row or a missing corpus used to cost that long to
report. A stage config that names a preflight has its inputs read torch-light first: a bad file
fails in about 2 s, before the tracking store is opened. The preflight returns what it read as a
`ReadAhead`, which ptmlab.run passes to the stage entry (`run_finetune(cfg, read_ahead)`); the
stage takes its tasks and, for a backbone built here, its corpus and tokenizer from it rather than
reading them twice. An entry called without one reads everything itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from omegaconf import DictConfig, OmegaConf

from lightning_modules.data.corpus_tokenizer import CorpusTokenizer, load_corpus_tokenizer
from lightning_modules.tasks.spec import LoadedTask, load_task
from ptmlab.contracts.decoding import DecodingSettings
from ptmlab.contracts.task_checks import multitask_task_nodes


def node_key(task_cfg: DictConfig) -> str:
    """A task node as resolved: the stage takes the preflight's read of a node equal to its own."""
    return OmegaConf.to_yaml(task_cfg, resolve=True)


@dataclass(frozen=True)
class ReadAhead:
    """What a stage's preflight read, handed to the stage entry. Empty: the stage reads itself."""

    tasks: Mapping[str, LoadedTask] = field(default_factory=dict)  # node_key(node) -> its task
    corpus_tokenizer: CorpusTokenizer | None = None  # of a backbone built from `model` (no reference)

    def task(self, task_cfg: DictConfig | None) -> LoadedTask:
        """The task the preflight read from this node, else `load_task` now."""
        ahead = self.tasks.get(node_key(task_cfg)) if task_cfg is not None else None
        return ahead if ahead is not None else load_task(task_cfg)


def read_tasks(*nodes: DictConfig) -> dict[str, LoadedTask]:
    """Each task node read and label-checked, by its `node_key`."""
    return {node_key(node): load_task(node) for node in nodes}


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
    read = load_corpus_tokenizer(cfg.data, cfg.tokenizer, cfg.paths.cache_dir)
    tokenizer = read.tokenizer
    if OmegaConf.select(cfg, "task.kind", default=None) == "generation":
        node = cfg.task.get("generation")
        decoding = DecodingSettings.from_dict(None if node is None else OmegaConf.to_container(node, resolve=True))
        decoding.check(vocab_size=len(tokenizer))
    return read


def task_data(cfg: DictConfig) -> ReadAhead:
    """stage=finetune: the task's splits, read and label-checked. Without a task there is nothing
    to read: the stage itself says what is missing."""
    if cfg.get("task") is None:
        return ReadAhead()
    return ReadAhead(read_tasks(cfg.task), corpus_and_tokenizer(cfg))  # the task first: a bad file fails sooner


def each_task_data(cfg: DictConfig) -> ReadAhead:
    """stage=multitask: every task of `stage.tasks`, read and label-checked."""
    return ReadAhead(read_tasks(*multitask_task_nodes(cfg).values()), corpus_and_tokenizer(cfg))
