"""Words → sub-word tensors for token classification, split at the tokenizer's own word
boundaries: the words go to a fast tokenizer with `is_split_into_words=True` and its `word_ids()`
say which word each sub-word came from (the Hugging Face token-classification recipe).

Each word's label sits on its first sub-word; the other sub-words and the special tokens get
-100 (ignored by the loss and the metrics). Words cut off by `max_length` get no position: the
decoder (tasks/tagged_predictions.py) tags them `O` (the first label for non-BIO tag sets) and the
metrics score them as such, against the file's full gold.

Batches (padded on the right to the longest row):
  input_ids, attention_mask, token_type_ids   B×T
  word_start     B×T  True on each word's first sub-word
  pool_index     B    0 (unused by the per-token head; kept so every batch has the same keys)
  example_index  B    position of the sentence in its split
  labels         B×T  tag index on first sub-words, -100 elsewhere; absent when unlabelled
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from lightning_modules.data.padding import pad_right, padded_tokens
from lightning_modules.data.task_data import Split
from ptmlab.contracts import ConfigError

IGNORE = -100  # torch cross_entropy's ignore_index


class WordTokenEncoder:
    def __init__(self, tokenizer, *, max_length: int = 128):
        if not getattr(tokenizer, "is_fast", False):
            raise ConfigError(
                "token classification needs a fast (Rust) tokenizer: its word_ids() map sub-words "
                f"to words; {type(tokenizer).__name__} has none (tokenizer)"
            )
        self.tokenizer, self.max_length = tokenizer, int(max_length)
        self.pad_id = next(i for i in (tokenizer.pad_token_id, tokenizer.eos_token_id, 0) if i is not None)

    def encode(self, sentences: Sequence[Sequence[str]]) -> list[dict]:
        """Encode sentences given as word lists (or 1-tuples holding one, as `TaggedSentence.texts`)."""
        sentences = [list(s[0]) if len(s) == 1 and not isinstance(s[0], str) else list(s) for s in sentences]
        if not sentences:
            return []
        try:
            enc = self.tokenizer(
                sentences,
                is_split_into_words=True,
                truncation=True,
                max_length=self.max_length,
                return_token_type_ids=True,
                return_attention_mask=False,
            )
        except ValueError as exc:  # e.g. byte-level BPE without add_prefix_space=True
            raise ConfigError(f"the tokenizer cannot encode pre-split words: {exc} (tokenizer)") from None
        out = []
        for i, ids in enumerate(enc["input_ids"]):
            word_ids = enc.word_ids(i)
            seen: set[int] = set()
            starts = []
            for w in word_ids:
                starts.append(w is not None and w not in seen)
                if w is not None:
                    seen.add(w)
            out.append(
                {
                    "input_ids": ids,
                    "token_type_ids": enc["token_type_ids"][i],
                    "word_start": starts,
                    "word_ids": [-1 if w is None else w for w in word_ids],
                }
            )
        return out

    def encode_split(self, split: Split) -> list[dict]:
        """Encoded sentences of a split, with per-position `label` (when labelled) and `example_index`."""
        encoded = self.encode([ex.words for ex in split.examples])
        for i, (item, ex) in enumerate(zip(encoded, split.examples, strict=True)):
            item["example_index"] = i
            if split.has_labels:
                item["label"] = [
                    ex.label[w] if start else IGNORE
                    for w, start in zip(item["word_ids"], item["word_start"], strict=True)
                ]
        return encoded

    def collate(self, items: list[dict]) -> dict[str, torch.Tensor]:
        batch = padded_tokens(items, self.pad_id)
        length = batch["input_ids"].size(1)
        batch["word_start"] = pad_right([x["word_start"] for x in items], False, length=length, dtype=torch.bool)
        batch["pool_index"] = torch.zeros(len(items), dtype=torch.long)
        batch["example_index"] = torch.tensor([x["example_index"] for x in items], dtype=torch.long)
        if "label" in items[0]:
            batch["labels"] = pad_right([x.get("label", ()) for x in items], IGNORE, length=length)
        return batch
