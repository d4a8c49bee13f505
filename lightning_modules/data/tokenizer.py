"""Tokenizers: trained on the corpus with Hugging Face `tokenizers` (WordPiece, byte-level BPE,
Unigram) and cached by corpus hash + settings, or loaded from a Hugging Face checkpoint.

Every tokenizer comes back as a `transformers.PreTrainedTokenizerFast`, so objectives read
mask/pad/cls/sep ids uniformly and `save_pretrained` gives the Hugging Face export.

A trained WordPiece vocabulary is not bit-reproducible from one cache to the next: `tokenizers`
numbers its `##` pieces in hash-map order and breaks equal-count merges by id
(huggingface/tokenizers#1794). The cache is what makes runs comparable: every run in one
PTMLAB_HOME on the same corpus and settings shares one tokenizer, recorded in the run's export.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from lightning_modules.data.corpus import Corpus
from ptmlab.contracts import ConfigError, DataError
from ptmlab.contracts.file_lock import exclusive

BERT_SPECIALS = {
    "pad_token": "[PAD]",
    "unk_token": "[UNK]",
    "cls_token": "[CLS]",
    "sep_token": "[SEP]",
    "mask_token": "[MASK]",
}
# Byte-level BPE (GPT-2/RoBERTa style); <s>/</s> double as cls/sep and bos/eos.
BPE_SPECIALS = {
    "pad_token": "<pad>",
    "unk_token": "<unk>",
    "cls_token": "<s>",
    "sep_token": "</s>",
    "mask_token": "<mask>",
    "bos_token": "<s>",
    "eos_token": "</s>",
}
# Extra tokens objectives may need (T5 sentinels, GPT's delimiter/extract for pair tasks).
NUM_SENTINELS = 20
EXTRA_SPECIALS = ["<delim>", "<extract>"] + [f"<extra_id_{i}>" for i in range(NUM_SENTINELS)]


def _lines(corpus: Corpus) -> Iterator[str]:
    for doc in corpus.documents():
        yield from doc


def _specials_for(kind: str) -> dict[str, str]:
    return BERT_SPECIALS if kind == "wordpiece" else BPE_SPECIALS


def _train_raw_tokenizer(kind: str, vocab_size: int, min_frequency: int, lowercase: bool, corpus: Corpus):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    specials = _specials_for(kind)
    special_list = list(dict.fromkeys(specials.values())) + EXTRA_SPECIALS
    if kind == "wordpiece":
        tok = Tokenizer(models.WordPiece(unk_token=specials["unk_token"]))
        tok.normalizer = normalizers.BertNormalizer(lowercase=lowercase, strip_accents=lowercase or None)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        trainer = trainers.WordPieceTrainer(
            vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=special_list, show_progress=False
        )
    elif kind == "bpe":
        tok = Tokenizer(models.BPE(unk_token=None))
        if lowercase:
            tok.normalizer = normalizers.Lowercase()
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=special_list,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
    elif kind == "unigram":
        tok = Tokenizer(models.Unigram())
        tok.normalizer = normalizers.Sequence([normalizers.NFKC()] + ([normalizers.Lowercase()] if lowercase else []))
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.decoder = decoders.Metaspace()
        trainer = trainers.UnigramTrainer(
            vocab_size=vocab_size, special_tokens=special_list, unk_token=specials["unk_token"], show_progress=False
        )
    else:
        raise ConfigError(f"tokenizer.kind={kind} is unknown; valid: wordpiece, bpe, unigram, pretrained")
    tok.train_from_iterator(_lines(corpus), trainer=trainer)
    cls, sep = specials["cls_token"], specials["sep_token"]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{cls} $A {sep}",
        pair=f"{cls} $A {sep} $B:1 {sep}:1",
        special_tokens=[(cls, tok.token_to_id(cls)), (sep, tok.token_to_id(sep))],
    )
    return tok, specials


def tokenizer_cache_key(tok_cfg: DictConfig, corpus_fingerprint: str) -> str:
    settings = {k: tok_cfg.get(k) for k in ("kind", "vocab_size", "min_frequency", "lowercase")}
    blob = json.dumps({"corpus": corpus_fingerprint, **settings, "extra": EXTRA_SPECIALS}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def load_pretrained_tokenizer(name_or_path: str):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(name_or_path), use_fast=True)
    except Exception as exc:
        raise ConfigError(f"cannot load tokenizer '{name_or_path}' (tokenizer.path): {type(exc).__name__}") from None


def build_tokenizer(tok_cfg: DictConfig, corpus: Corpus | None, cache_dir: Path, corpus_fingerprint: str | None = None):
    """Train (or take from the cache) the tokenizer that `tok_cfg` describes."""
    from transformers import PreTrainedTokenizerFast

    kind = str(tok_cfg.kind)
    if kind == "pretrained":
        if not tok_cfg.get("path"):
            raise ConfigError("tokenizer.kind=pretrained needs tokenizer.path (a Hugging Face name or folder)")
        return load_pretrained_tokenizer(tok_cfg.path)
    if corpus is None:
        raise ConfigError(f"tokenizer.kind={kind} is trained on a corpus, but this stage has none")
    fingerprint = corpus_fingerprint or corpus.fingerprint()
    target = Path(cache_dir) / "tokenizers" / tokenizer_cache_key(tok_cfg, fingerprint)
    if not (target / "tokenizer.json").exists():
        # One trainer per cache entry at a time: jobs started together on one corpus would each
        # train, and WordPiece's tie-breaking differs from one training to the next (even in how
        # many pieces a small corpus allows), so the second waits and reads what the first wrote.
        target.parent.mkdir(parents=True, exist_ok=True)
        with exclusive(target.parent / f".{target.name}.lock"):
            if not (target / "tokenizer.json").exists():
                _train_into(target, tok_cfg, fingerprint, corpus)
    try:
        return PreTrainedTokenizerFast.from_pretrained(str(target))
    except Exception as exc:
        raise DataError(f"tokenizer cache at {target} is unreadable ({type(exc).__name__}); delete it") from None


def _train_into(target: Path, tok_cfg: DictConfig, fingerprint: str, corpus: Corpus) -> None:
    """Train the tokenizer and write it to `target` (under the caller's lock)."""
    from transformers import PreTrainedTokenizerFast

    raw, specials = _train_raw_tokenizer(
        str(tok_cfg.kind),
        int(tok_cfg.vocab_size),
        int(tok_cfg.get("min_frequency", 2)),
        bool(tok_cfg.get("lowercase", False)),
        corpus,
    )
    achieved, requested = raw.get_vocab_size(), int(tok_cfg.vocab_size)
    # The trainer stops early when the corpus has no more pairs/pieces to merge: a
    # vocabulary that large cannot be learned from this corpus.
    if achieved < requested:
        raise ConfigError(
            f"tokenizer.vocab_size={requested} is larger than this corpus allows "
            f"(training stopped at {achieved} tokens); lower tokenizer.vocab_size or tokenizer.min_frequency"
        )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=raw, model_max_length=1 << 20, **specials, additional_special_tokens=EXTRA_SPECIALS
    )
    # Write to a temporary sibling, then rename: a killed run never leaves a half cache.
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tmp-"))
    try:
        fast.save_pretrained(str(tmp))
        (tmp / "ptmlab_tokenizer.json").write_text(
            json.dumps({"corpus_fingerprint": fingerprint, **OmegaConf.to_container(tok_cfg, resolve=True)}, indent=2)
        )
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
