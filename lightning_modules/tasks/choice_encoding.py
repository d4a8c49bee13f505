"""Multiple-choice examples (data/choice_jsonl.py) as model inputs: one sequence per (context,
choice), all choices of a batch's examples flattened into one batch of sequences.

Two ways to score a choice (`task.choice_scoring`, resolved by the finetune stage):

    head            the pair as tasks/encoding.py encodes sentence pairs (an encoder's
                    `[CLS] context [SEP] choice [SEP]`; a decoder's `<start> context <delim>
                    choice <extract>`); a linear head reads the pooled state: one score per choice
    log_likelihood  a causal decoder reads `<start> context choice` and the score is the summed
                    log-probability of the choice's tokens given what precedes them
                    (lm-evaluation-harness's `loglikelihood`): the choice is " " + choice, its
                    tokens are those of `tokenize(context + " " + choice)` past the context's
                    own (lm-eval's `_encode_pair`); `target_mask` marks them. A row longer than
                    max_length loses context tokens from the left, never choice tokens.

Batches (padded on the right):
  input_ids, attention_mask, token_type_ids   S×T  S = every choice of the batch's examples, in order
  pool_index        S     the position the head reads (head scoring)
  target_mask       S×T   1 on the choice's tokens (log_likelihood scoring)
  choice_mask       B×N   1 where example b has a choice n; N = the most choices in the example's split
  example_index, labels   B
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from lightning_modules.data.padding import pad_right, padded_tokens
from lightning_modules.data.task_data import Split
from lightning_modules.tasks.encoding import PairEncoder
from ptmlab.contracts import ConfigError

SCORINGS = ("head", "log_likelihood")


class ChoiceEncoder:
    def __init__(self, tokenizer, *, causal: bool, max_length: int = 128, scoring: str = "head"):
        if scoring not in SCORINGS:
            raise ConfigError(f"task.choice_scoring={scoring} is unknown; valid: auto, {', '.join(SCORINGS)}")
        if scoring == "log_likelihood" and not causal:
            raise ConfigError(
                "task.choice_scoring=log_likelihood needs a causal decoder (model=gpt_tiny, a Hugging "
                "Face causal LM); an encoder scores choices with a head (task.choice_scoring=head)"
            )
        self.tokenizer, self.max_length, self.scoring = tokenizer, int(max_length), scoring
        self.pairs = PairEncoder(tokenizer, causal=causal, max_length=max_length)
        self.pad_id = self.pairs.pad_id
        self.start_id = self.pairs.start_id if causal else None  # what a decoder's sequence starts with

    def encode(self, rows: Sequence[Sequence]) -> list[dict]:
        """Rows of (context, choice 1, choice 2, ...) -> one item per row: {"choices": [sequence, ...]}."""
        items = []
        for context, *choices in rows:
            if self.scoring == "head":
                sequences = self.pairs.encode([(context, c) if context else (c,) for c in choices])
            else:
                sequences = [self._scored_sequence(context, c) for c in choices]
            items.append({"choices": sequences, "width": len(choices)})
        return items

    def _scored_sequence(self, context: str, choice: str) -> dict:
        tok = self.tokenizer
        context_ids = tok(context, add_special_tokens=False)["input_ids"] if context else []
        whole = tok(f"{context} {choice}" if context else choice, add_special_tokens=False)["input_ids"]
        target = whole[len(context_ids) :]
        if not target:
            raise ConfigError(f"choice {choice!r} encodes to no tokens after its context (tokenizer)")
        context_ids = context_ids[max(0, len(context_ids) + len(target) + 1 - self.max_length) :]
        target = target[: self.max_length - 1 - len(context_ids)]
        ids = [self.start_id, *context_ids, *target]
        return {
            "input_ids": ids,
            "target_mask": [0] * (1 + len(context_ids)) + [1] * len(target),
            "pool_index": len(ids) - 1,
        }

    def encode_split(self, split: Split) -> list[dict]:
        items = self.encode([ex.texts for ex in split.examples])
        width = max(item["width"] for item in items)
        for i, (item, ex) in enumerate(zip(items, split.examples, strict=True)):
            item["example_index"], item["width"] = i, width  # every batch of a split: N choices wide
            item["length"] = max(len(s["input_ids"]) for s in item["choices"])  # stage.group_by_length
            if split.has_labels:
                item["label"] = ex.label
        return items

    def collate(self, items: list[dict]) -> dict[str, torch.Tensor]:
        sequences = [s for item in items for s in item["choices"]]
        width = max(item.get("width", len(item["choices"])) for item in items)
        batch = {
            **padded_tokens(sequences, self.pad_id),
            "pool_index": torch.tensor([s["pool_index"] for s in sequences], dtype=torch.long),
            "choice_mask": pad_right([[1] * len(item["choices"]) for item in items], 0, length=width).bool(),
            "example_index": torch.tensor([x.get("example_index", i) for i, x in enumerate(items)], dtype=torch.long),
        }
        if "target_mask" in sequences[0]:
            batch["target_mask"] = pad_right(
                [s["target_mask"] for s in sequences], 0, length=batch["input_ids"].size(1)
            ).bool()
        if "label" in items[0]:
            batch["labels"] = torch.tensor([x["label"] for x in items], dtype=torch.long)
        return batch
