"""Pre-training examples built from the tokenized corpus and cached on disk, keyed by corpus,
tokenizer, construction and block size (`examples/<key>.pt` under `paths.cache_dir`).

No Lightning here: stage=pretrain's preflight (data/read_ahead.py) builds them before the
training stack is imported, so a corpus too small for one block fails in seconds, and the
stage's datamodule (data/pretrain_datamodule.py) finds them in the cache instead of building
them again.
"""

from __future__ import annotations

import hashlib
import os
import random
import tempfile
from pathlib import Path

import torch
from omegaconf import DictConfig

from lightning_modules.data.blocks import line_blocks, packed_blocks, segment_pairs
from lightning_modules.data.corpus import Corpus
from ptmlab.contracts import ConfigError

CONSTRUCTIONS = ("packed", "line_by_line", "segment_pairs")
VAL_SPLIT_SEED = 1234  # fixed, so every run of a corpus validates on the same examples


def construction_of(data_cfg: DictConfig) -> str:
    construction = str(data_cfg.get("construction", "packed"))
    if construction not in CONSTRUCTIONS:
        raise ConfigError(f"data.construction={construction} is unknown; valid: {', '.join(CONSTRUCTIONS)}")
    return construction


def _negatives_key(data_cfg: DictConfig) -> str:
    # NSP and SOP pairs differ only in their negatives: they must not share a cache entry.
    if construction_of(data_cfg) != "segment_pairs":
        return ""
    return f"|{data_cfg.get('pair_negative', 'random_document')}"


def examples_cache_path(data_cfg: DictConfig, tokenizer, fingerprint: str, cache_dir: str | Path) -> Path:
    key = hashlib.sha256(
        f"{fingerprint}|{tokenizer.name_or_path}|{len(tokenizer)}|{construction_of(data_cfg)}|"
        f"{data_cfg.block_size}{_negatives_key(data_cfg)}".encode()
    ).hexdigest()[:16]
    return Path(cache_dir) / "examples" / f"{key}.pt"


def tokenized_documents(corpus: Corpus, tokenizer) -> list[list[list[int]]]:
    """Per document, per line: its token ids (no special tokens)."""
    docs = list(corpus.documents())
    flat_lines = [line for doc in docs for line in doc]
    encoded = tokenizer(flat_lines, add_special_tokens=False)["input_ids"]
    out, pos = [], 0
    for doc in docs:
        out.append(encoded[pos : pos + len(doc)])
        pos += len(doc)
    return out


def build_examples(data_cfg: DictConfig, tokenizer, corpus: Corpus):
    """packed: N×block_size tensor; line_by_line: framed lists of ids; segment_pairs: pair dicts."""
    construction = construction_of(data_cfg)
    cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    block_size = int(data_cfg.block_size)
    docs = tokenized_documents(corpus, tokenizer)
    if construction == "packed":
        return packed_blocks([[t for line in d for t in line] for d in docs], block_size, cls_id, sep_id)
    if construction == "line_by_line":
        return line_blocks([line for d in docs for line in d], block_size, cls_id, sep_id)
    negative = str(data_cfg.get("pair_negative", "random_document"))
    return segment_pairs(docs, block_size, cls_id, sep_id, random.Random(VAL_SPLIT_SEED), negative)


def cache_examples(data_cfg: DictConfig, tokenizer, corpus: Corpus, fingerprint: str, cache_dir: str | Path) -> Path:
    """The examples' cache file, built unless it is there (DataError when the corpus gives none)."""
    path = examples_cache_path(data_cfg, tokenizer, fingerprint, cache_dir)
    if path.exists():
        return path
    examples = build_examples(data_cfg, tokenizer, corpus)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written to a temporary sibling, then renamed: a killed run never leaves a half cache.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="tmp-", suffix=".partial.pt")
    os.close(fd)
    torch.save(examples, tmp)
    os.replace(tmp, path)
    return path
