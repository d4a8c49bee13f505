"""A stage's corpus and the tokenizer built on it, read once per process.

Pre-training (data/pretrain_datamodule.py) and a fresh backbone (artifacts/backbone_reference.py)
both find the corpus (`data.corpus`, a missing path is a DataError) and train or load the
tokenizer (`tokenizer`, a vocabulary larger than the corpus allows is a ConfigError). A stage's
preflight (`stage.preflight`, ptmlab.run) reads them before the training stack is imported
(torch-free: `tokenizers` and the tokenizer half of transformers) and leaves them here for the
stage's own `load_corpus_tokenizer` of the same nodes, so nothing is read twice.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from lightning_modules.data.corpus import Corpus
from lightning_modules.data.tokenizer import build_tokenizer


@dataclass(frozen=True)
class CorpusTokenizer:
    corpus: Corpus
    fingerprint: str  # Corpus.fingerprint(): the tokenizer and example caches are keyed by it
    tokenizer: object  # transformers.PreTrainedTokenizerFast


_READ_AHEAD: dict[str, CorpusTokenizer] = {}


def _ahead_key(data_cfg: DictConfig, tokenizer_cfg: DictConfig, cache_dir: str | Path) -> str:
    # each node resolved where it is (its interpolations name the root's `paths`)
    return json.dumps(
        {
            "corpus": OmegaConf.to_container(data_cfg.corpus, resolve=True),
            "tokenizer": OmegaConf.to_container(tokenizer_cfg, resolve=True),
            "cache_dir": str(Path(cache_dir)),
        },
        sort_keys=True,
        default=str,
    )


def read_corpus_tokenizer_ahead(
    data_cfg: DictConfig, tokenizer_cfg: DictConfig, cache_dir: str | Path
) -> CorpusTokenizer:
    """load_corpus_tokenizer now, kept for the stage's own call with the same nodes."""
    loaded = load_corpus_tokenizer(data_cfg, tokenizer_cfg, cache_dir)
    _READ_AHEAD[_ahead_key(data_cfg, tokenizer_cfg, cache_dir)] = loaded
    return loaded


def load_corpus_tokenizer(data_cfg: DictConfig, tokenizer_cfg: DictConfig, cache_dir: str | Path) -> CorpusTokenizer:
    """The corpus `data.corpus` names (DataError when missing) and the tokenizer `tokenizer` says,
    trained on it or read from the cache (data/tokenizer.py)."""
    if _READ_AHEAD and (ahead := _READ_AHEAD.pop(_ahead_key(data_cfg, tokenizer_cfg, cache_dir), None)) is not None:
        return ahead
    corpus = instantiate(data_cfg.corpus)
    fingerprint = corpus.fingerprint()
    return CorpusTokenizer(corpus, fingerprint, build_tokenizer(tokenizer_cfg, corpus, Path(cache_dir), fingerprint))
