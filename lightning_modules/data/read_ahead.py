"""stage=pretrain's preflight (`stage.preflight`, ptmlab.run): its corpus, tokenizer and examples
read before the training stack is imported (torch alone, no Lightning, MLflow or models), so a
missing corpus, a vocabulary the corpus cannot fill or a corpus smaller than one block fails in
seconds. It returns the corpus and tokenizer (data/corpus_tokenizer.py), which ptmlab.run hands to
the stage entry; the examples the stage takes from their cache (data/pretrain_examples.py)."""

from __future__ import annotations

from omegaconf import DictConfig

from lightning_modules.data.corpus_tokenizer import CorpusTokenizer, load_corpus_tokenizer
from lightning_modules.data.pretrain_examples import cache_examples, construction_of


def corpus_and_tokenizer(cfg: DictConfig) -> CorpusTokenizer:
    construction_of(cfg.data)  # as the datamodule does, before it reads anything
    read = load_corpus_tokenizer(cfg.data, cfg.tokenizer, cfg.paths.cache_dir)
    cache_examples(cfg.data, read.tokenizer, read.corpus, read.fingerprint, cfg.paths.cache_dir)
    return read
