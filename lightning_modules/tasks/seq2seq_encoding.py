"""Source → target encoding for `task.kind: generation` on an encoder–decoder (teacher forcing).

    source   `[CLS] <source prefix> source [SEP]` (the tokenizer's single template, or built from
             cls/sep), cut to `max_source_length` sub-words (the closing [SEP] kept)
    target   the first reference's sub-words, cut to `max_target_length - 1`, then the end token
             (eos, else [SEP]): what the decoder learns to emit, and where decoding stops
    decoder  starts from [PAD], as T5 and ptmlab's seq2seq pre-training objectives
             (objectives/seq2seq.py): decoder_input_ids = [PAD] + target[:-1]

Batches (right-padded to the longest row):
  input_ids, attention_mask                  B×S   the source
  decoder_input_ids, decoder_attention_mask  B×T   the target shifted right
  labels                                     B×T   the target, -100 on padding
  example_index                              B     position in the split (prediction files)
An unlabelled split has no decoder fields and no labels (it is only decoded).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from lightning_modules.data.padding import pad_right, padded_tokens
from lightning_modules.data.task_data import Split
from ptmlab.contracts import ConfigError
from ptmlab.contracts.decoding import DecodingSettings

IGNORE = -100


class Seq2SeqEncoder:
    def __init__(
        self, tokenizer, *, max_source_length: int = 128, max_target_length: int = 128, source_prefix: str | None = None
    ):
        if int(max_target_length) < 2:
            raise ConfigError(
                f"task.max_target_length={max_target_length} leaves no room for a target token "
                "before the end token (need >= 2)"
            )
        self.tokenizer = tokenizer
        self.max_source_length, self.max_target_length = int(max_source_length), int(max_target_length)
        self.source_prefix = source_prefix or ""
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.cls_id = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
        self.eos_id = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.sep_token_id
        if self.eos_id is None:
            raise ConfigError("generation needs an end token: the tokenizer has neither eos nor [SEP] (tokenizer)")
        self.decoder_start_id = self.pad_id

    def encode_sources(self, sources: Sequence[str]) -> list[list[int]]:
        texts = [f"{self.source_prefix} {s}".strip() if self.source_prefix else s for s in sources]
        body_budget = self.max_source_length - (2 if self.cls_id is not None else 1)
        rows = []
        for ids in self.tokenizer(texts, add_special_tokens=False)["input_ids"]:
            ids = list(ids)[: max(body_budget, 0)]
            rows.append(([self.cls_id] if self.cls_id is not None else []) + ids + [self.eos_id])
        return rows

    def encode_targets(self, targets: Sequence[str]) -> list[list[int]]:
        return [
            list(ids)[: self.max_target_length - 1] + [self.eos_id]
            for ids in self.tokenizer(list(targets), add_special_tokens=False)["input_ids"]
        ]

    def encode(self, texts: Sequence[Sequence[str]]) -> list[dict]:
        """1-tuples of source strings (as PairEncoder.encode takes texts): the source side only."""
        return [{"input_ids": ids} for ids in self.encode_sources([t[0] for t in texts])]

    def encode_split(self, split: Split) -> list[dict]:
        items = self.encode([ex.texts for ex in split.examples])
        targets = self.encode_targets([ex.label[0] for ex in split.examples]) if split.has_labels else None
        for i, item in enumerate(items):
            item["example_index"] = i
            if targets is not None:
                item["target_ids"] = targets[i]
        return items

    def collate(self, items: list[dict]) -> dict[str, torch.Tensor]:
        source = padded_tokens(items, self.pad_id)
        batch = {
            "input_ids": source["input_ids"],
            "attention_mask": source["attention_mask"],
            "example_index": torch.tensor([x["example_index"] for x in items], dtype=torch.long),
        }
        if "target_ids" in items[0]:
            targets = [x["target_ids"] for x in items]
            length = max(len(t) for t in targets)
            batch["labels"] = pad_right(targets, IGNORE, length=length)
            batch["decoder_input_ids"] = pad_right(
                [[self.decoder_start_id, *t[:-1]] for t in targets], self.pad_id, length=length
            )
            batch["decoder_attention_mask"] = pad_right([[1] * len(t) for t in targets], 0, length=length)
        return batch

    @torch.no_grad()
    def generate(self, twin, batch: dict[str, torch.Tensor], settings: DecodingSettings) -> torch.Tensor:
        """B×N generated ids for one collated batch, the decoder start token dropped."""
        out = twin.generate(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            eos_token_id=self.eos_id,
            pad_token_id=self.pad_id,
            decoder_start_token_id=self.decoder_start_id,
            **settings.generate_kwargs(),
        )
        return out[:, 1:]
