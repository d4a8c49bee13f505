"""Sentence and sentence-pair encoding as each architecture expects, and batching.

Encoders (bidirectional): the tokenizer's own pair template when it has one, e.g. BERT's
`[CLS] a [SEP] b [SEP]` with token types 0…0 1…1 (RoBERTa's `<s> a </s></s> b </s>`); without a
template, `[CLS] a [SEP] b [SEP]` is built here from cls/sep. The head reads position 0.
Causal decoders (GPT, Radford et al. 2018): `<start> a <delim> b <extract>`; the head reads the
`<extract>` position, the only one that has seen both sentences. Start = bos (else cls); delim and
extract are the tokenizer's `<delim>`/`<extract>` tokens (ptmlab-trained tokenizers have them),
else sep/eos; a tokenizer with neither is a ConfigError. Token types are all 0 for decoders.
Pairs are truncated longest-first to `max_length`, as Hugging Face's `truncation=True` does.

Batches (dict of tensors, padded on the right to the longest row):
  input_ids, attention_mask (1 = token, 0 = pad), token_type_ids   B×T
  pool_index     B   position the sequence-level head reads ([CLS] = 0, or <extract>)
  example_index  B   position of the example in its split (for prediction files)
  labels         B   long class indices, or float scores (regression); absent when unlabelled
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from lightning_modules.data.padding import padded_tokens
from lightning_modules.data.task_data import Split
from ptmlab.contracts import ConfigError


class PairEncoder:
    def __init__(self, tokenizer, *, causal: bool, max_length: int = 128):
        self.tokenizer, self.causal, self.max_length = tokenizer, causal, int(max_length)
        vocab = tokenizer.get_vocab()
        if causal:
            self.start_id = _first_id(tokenizer.bos_token_id, tokenizer.cls_token_id)
            self.delim_id = _first_id(vocab.get("<delim>"), tokenizer.sep_token_id, tokenizer.eos_token_id)
            self.extract_id = _first_id(vocab.get("<extract>"), tokenizer.eos_token_id, tokenizer.sep_token_id)
            if None in (self.start_id, self.delim_id, self.extract_id):
                raise ConfigError(
                    "a causal decoder needs start (bos/cls), delimiter and extract tokens; this "
                    "tokenizer has no bos/cls, <delim>/sep or <extract>/eos token (tokenizer)"
                )
            self.uses_template = False
        else:
            plain = tokenizer("a b", add_special_tokens=False)["input_ids"]
            self.uses_template = tokenizer("a b")["input_ids"] != plain
            if not self.uses_template and None in (tokenizer.cls_token_id, tokenizer.sep_token_id):
                raise ConfigError("the tokenizer has neither a pair template nor [CLS]/[SEP] tokens (tokenizer)")
        self.pad_id = _first_id(tokenizer.pad_token_id, tokenizer.eos_token_id, 0)

    def encode(self, texts: Sequence[Sequence[str]]) -> list[dict]:
        """Encode a list of 1- or 2-tuples of strings; returns input_ids, token_type_ids, pool_index."""
        if not texts:
            return []
        n_fields = len(texts[0])
        columns = [[t[i] for t in texts] for i in range(n_fields)]
        if not self.causal and self.uses_template:
            enc = self.tokenizer(
                *columns,
                truncation=True,
                max_length=self.max_length,
                return_token_type_ids=True,
                return_attention_mask=False,
            )
            return [
                {"input_ids": ids, "token_type_ids": types, "pool_index": 0}
                for ids, types in zip(enc["input_ids"], enc["token_type_ids"], strict=True)
            ]
        pieces = [self.tokenizer(col, add_special_tokens=False)["input_ids"] for col in columns]
        out = []
        for parts in zip(*pieces, strict=True):
            parts = _truncate_longest_first([list(p) for p in parts], self.max_length - (n_fields + 1))
            if self.causal:
                ids = [self.start_id, *parts[0]]
                if n_fields == 2:
                    ids += [self.delim_id, *parts[1]]
                ids.append(self.extract_id)
                out.append({"input_ids": ids, "token_type_ids": [0] * len(ids), "pool_index": len(ids) - 1})
            else:
                cls, sep = self.tokenizer.cls_token_id, self.tokenizer.sep_token_id
                ids, types = [cls, *parts[0], sep], [0] * (len(parts[0]) + 2)
                if n_fields == 2:
                    ids += [*parts[1], sep]
                    types += [1] * (len(parts[1]) + 1)
                out.append({"input_ids": ids, "token_type_ids": types, "pool_index": 0})
        return out

    def encode_split(self, split: Split) -> list[dict]:
        """Encoded examples of a split, with `label` (when labelled) and `example_index`."""
        encoded = self.encode([ex.texts for ex in split.examples])
        for i, (item, ex) in enumerate(zip(encoded, split.examples, strict=True)):
            item["example_index"] = i
            if split.has_labels:
                item["label"] = ex.label
        return encoded

    def collate(self, items: list[dict]) -> dict[str, torch.Tensor]:
        batch = {
            **padded_tokens(items, self.pad_id),
            "pool_index": torch.tensor([x["pool_index"] for x in items], dtype=torch.long),
            "example_index": torch.tensor([x["example_index"] for x in items], dtype=torch.long),
        }
        if "label" in items[0]:
            labels = [x["label"] for x in items]
            dtype = torch.float32 if isinstance(labels[0], float) else torch.long
            batch["labels"] = torch.tensor(labels, dtype=dtype)
        return batch


def encoded_length(item: dict) -> int:
    """Tokens of one encoded example (an example of several sequences, multiple choice, says its own)."""
    return item.get("length") or len(item["input_ids"])


def longest_first(items: list[dict]) -> list[int]:
    """Indices of encoded examples, longest first (ties in split order): the order inference reads
    a split in, so a batch pads to its own examples' lengths rather than to whichever long one split
    order put in it (SST-2 dev, MiniLM, 128 a batch: 25,416 token positions through the model
    instead of 46,064 for 21,943 real tokens; half the CPU). The items of one example (a span task's
    context windows) share its longest item's length as their key, so they stay together and in
    the order they were cut."""
    longest: dict[int, int] = {}
    for i, item in enumerate(items):
        key = item.get("example_index", i)
        longest[key] = max(longest.get(key, 0), encoded_length(item))
    return sorted(range(len(items)), key=lambda i: -longest[items[i].get("example_index", i)])


def in_split_order(parts: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    """Per-example rows gathered batch by batch as (example_index, rows) pairs, concatenated and put
    back in split order (the order prediction files and per-group metrics read)."""
    index = torch.cat([i for i, _ in parts])
    return torch.cat([rows for _, rows in parts])[index.argsort()]


def _first_id(*candidates):
    return next((c for c in candidates if c is not None), None)


def _truncate_longest_first(parts: list[list[int]], budget: int) -> list[list[int]]:
    """Drop tokens from the end of the longest part until the total fits (HF longest_first)."""
    budget = max(budget, 0)
    while sum(len(p) for p in parts) > budget:
        longest = max(range(len(parts)), key=lambda i: len(parts[i]))
        parts[longest].pop()
    return parts
