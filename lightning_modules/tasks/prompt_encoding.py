"""Source → target encoding for `task.kind: generation` on a decoder-only model (GPT): the source is
the prompt, the target its continuation, one sequence (Radford et al. 2018's delimiter layout).

    prompt   `[CLS] <source prefix> source <delim>`: the start token (cls, else bos; none without
             either), the source cut to leave room, then the separator (the tokenizer's `<delim>`,
             else [SEP], else its end token)
    target   the first reference's sub-words, cut to `max_target_length - 1`, then the end token
             (eos, else [SEP]): decoding stops there, and only the continuation is the output
    loss     on the target tokens only: a position's label is the next token where that token is
             part of the target (end token included), -100 on the prompt and padding

Batches:
  input_ids, attention_mask   B×T   prompt + target, right-padded (training, teacher forcing)
  labels                      B×T   next-token targets, -100 on the prompt and padding
  prompt_ids, prompt_attention_mask
                              B×P   the prompt alone, left-padded: `generate()` continues every
                                    row from the same column (positions come from the mask)
  example_index               B     position in the split (prediction files)
An unlabelled split has the prompt fields only.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from lightning_modules.data.padding import pad_right
from lightning_modules.tasks.seq2seq_encoding import IGNORE, Seq2SeqEncoder
from ptmlab.contracts.decoding import DecodingSettings

DELIMITER = "<delim>"  # one of ptmlab's trained tokenizers' extra specials (data/tokenizer.py)


def pad_left(rows: Sequence[Sequence[int]], fill: int, *, length: int) -> torch.Tensor:
    """B×length: `fill` first, row i's values at the end."""
    out = torch.full((len(rows), length), fill, dtype=torch.long)
    for i, row in enumerate(rows):
        if row:
            out[i, length - len(row) :] = torch.as_tensor(row, dtype=torch.long)
    return out


class PromptEncoder(Seq2SeqEncoder):
    """Reuses Seq2SeqEncoder's source prefixing, cutting and end-token rules; the prompt ends with
    the separator instead of the end token."""

    def __init__(
        self, tokenizer, *, max_source_length: int = 128, max_target_length: int = 128, source_prefix: str | None = None
    ):
        super().__init__(
            tokenizer,
            max_source_length=max_source_length,
            max_target_length=max_target_length,
            source_prefix=source_prefix,
        )
        delimiter = tokenizer.convert_tokens_to_ids(DELIMITER) if DELIMITER in tokenizer.get_vocab() else None
        self.separator_id = next(i for i in (delimiter, tokenizer.sep_token_id, self.eos_id) if i is not None)

    def encode_sources(self, sources: Sequence[str]) -> list[list[int]]:
        return [row[:-1] + [self.separator_id] for row in super().encode_sources(sources)]  # end token -> separator

    def collate(self, items: list[dict]) -> dict[str, torch.Tensor]:
        prompts = [x["input_ids"] for x in items]
        width = max(len(p) for p in prompts)
        batch = {
            "prompt_ids": pad_left(prompts, self.pad_id, length=width),
            "prompt_attention_mask": pad_left([[1] * len(p) for p in prompts], 0, length=width),
            "example_index": torch.tensor([x["example_index"] for x in items], dtype=torch.long),
        }
        if "target_ids" in items[0]:
            rows = [p + x["target_ids"] for p, x in zip(prompts, items)]
            # labels[t] = rows[t + 1] where that token is a target token: logits at t predict t + 1
            labels = [[IGNORE] * (len(p) - 1) + x["target_ids"] + [IGNORE] for p, x in zip(prompts, items)]
            length = max(len(r) for r in rows)
            batch["input_ids"] = pad_right(rows, self.pad_id, length=length)
            batch["attention_mask"] = pad_right([[1] * len(r) for r in rows], 0, length=length)
            batch["labels"] = pad_right(labels, IGNORE, length=length)
        else:
            batch["input_ids"], batch["attention_mask"] = batch["prompt_ids"], batch["prompt_attention_mask"]
        return batch

    @torch.no_grad()
    def generate(self, twin, batch: dict[str, torch.Tensor], settings: DecodingSettings) -> torch.Tensor:
        """B×N continuation ids (the prompt cut off; `generate()` returns prompt + continuation)."""
        prompt = batch["prompt_ids"]
        out = twin.generate(
            input_ids=prompt,
            attention_mask=batch["prompt_attention_mask"],
            eos_token_id=self.eos_id,
            pad_token_id=self.pad_id,
            **settings.generate_kwargs(),
        )
        return out[:, prompt.shape[1] :]
