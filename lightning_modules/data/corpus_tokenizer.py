"""A stage's corpus and the tokenizer built on it, read once per process.

Pre-training (data/pretrain_datamodule.py) and a fresh backbone (artifacts/backbone_reference.py)
both find the corpus (`data.corpus`, a missing path is a DataError) and train or load the
tokenizer (`tokenizer`, a vocabulary larger than the corpus allows is a ConfigError). A stage's
preflight (`stage.preflight`, ptmlab.run) reads them before the training stack is imported
(torch-free: `tokenizers` and the tokenizer half of transformers) and returns them, which
ptmlab.run hands to the stage entry (pretrain's as they are, a fine-tune's in its `ReadAhead`,
tasks/read_ahead.py), so nothing is read twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig

from lightning_modules.data.corpus import Corpus
from lightning_modules.data.tokenizer import build_tokenizer


@dataclass(frozen=True)
class CorpusTokenizer:
    corpus: Corpus
    fingerprint: str  # Corpus.fingerprint(): the tokenizer and example caches are keyed by it
    tokenizer: object  # transformers.PreTrainedTokenizerFast


def load_corpus_tokenizer(data_cfg: DictConfig, tokenizer_cfg: DictConfig, cache_dir: str | Path) -> CorpusTokenizer:
    """The corpus `data.corpus` names (DataError when missing) and the tokenizer `tokenizer` says,
    trained on it or read from the cache (data/tokenizer.py)."""
    corpus = instantiate(data_cfg.corpus)
    fingerprint = corpus.fingerprint()
    return CorpusTokenizer(corpus, fingerprint, build_tokenizer(tokenizer_cfg, corpus, Path(cache_dir), fingerprint))
