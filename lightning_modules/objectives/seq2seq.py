"""The shared machinery of encoder–decoder objectives (BART denoising, T5 span corruption,
MASS): corrupt each row into (source, target), run the encoder on the source and the decoder on
the target shifted right, and score the decoder's predictions of the target with an output layer
tied to the shared token table (plus a bias, BART's final_logits_bias).

A subclass implements `corrupt_row(ids, generator) -> (source, target)` on the real tokens of
one row (framing included); variable-length results are padded here.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from lightning_modules.objectives.base import Objective, ObjectiveOutput, predicted_token_loss
from lightning_modules.objectives.masking import IGNORE_INDEX
from lightning_modules.objectives.seeding import SeededCorruption


def pad_rows(rows: list[torch.Tensor], pad_id: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad 1-D id tensors into (B×T ids, B×T attention mask) on `device`. Padded on the host
    and copied once: a row at a time on an accelerator is two small copies and launches a row."""
    length = max(1, max(r.numel() for r in rows))
    ids = torch.full((len(rows), length), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), length), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : r.numel()] = r.cpu()
        mask[i, : r.numel()] = 1
    return ids.to(device), mask.to(device)


def shift_right(target: torch.Tensor, target_mask: torch.Tensor, start_id: int, pad_id: int) -> torch.Tensor:
    """Decoder input: start_id, then the target without its last token (teacher forcing)."""
    shifted = torch.full_like(target, pad_id)
    shifted[:, 0] = start_id
    shifted[:, 1:] = target[:, :-1].masked_fill(target_mask[:, :-1] == 0, pad_id)
    return shifted


class Seq2SeqObjective(Objective):
    name = "seq2seq"

    def __init__(self, backbone: nn.Module, tokenizer, params=None, **values: Any):
        super().__init__()
        self.params = params = self.declared_params(params, values)
        self.pad_id = int(tokenizer.pad_token_id)
        # The decoder starts from [PAD] (as T5); any fixed id works, its embedding is learned.
        self.decoder_start_id = self.pad_id
        self.corruption = SeededCorruption(params.seed)
        self.bias = nn.Parameter(torch.zeros(backbone.get_input_embeddings().weight.shape[0]))

    def corrupt_row(self, ids: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError  # pragma: no cover

    def corrupt(self, batch: dict[str, torch.Tensor]):
        """(source ids, source mask, target ids, target mask), each B×T padded."""
        input_ids = batch["input_ids"]
        attention_mask = batch.get("attention_mask")
        # Row-wise corruption runs on the CPU, drawing from a CPU generator on any accelerator. The
        # batch comes to the host in one copy: a boolean index of each row on the device waited for
        # it twice a row (64 waits a step at batch 32). On an H100, t5_tiny's span-corruption step
        # took 29.5 ms that way and takes 17.6 now (bench/seq2seq_corruption.py).
        generator = self.corruption.generator(torch.device("cpu"))
        host_ids = input_ids.cpu()
        host_mask = attention_mask.bool().cpu() if attention_mask is not None else None
        sources, targets = [], []
        for row in range(host_ids.shape[0]):
            ids = host_ids[row] if host_mask is None else host_ids[row][host_mask[row]]
            source, target = self.corrupt_row(ids, generator)
            sources.append(source)
            targets.append(target)
        source_ids, source_mask = pad_rows(sources, self.pad_id, input_ids.device)
        target_ids, target_mask = pad_rows(targets, self.pad_id, input_ids.device)
        return source_ids, source_mask, target_ids, target_mask

    def forward(self, batch: dict[str, torch.Tensor], backbone: nn.Module) -> ObjectiveOutput:
        source_ids, source_mask, target_ids, target_mask = self.corrupt(batch)
        decoder_input = shift_right(target_ids, target_mask, self.decoder_start_id, self.pad_id)
        out = backbone(
            source_ids, attention_mask=source_mask, decoder_input_ids=decoder_input, decoder_attention_mask=target_mask
        )
        labels = target_ids.masked_fill(target_mask == 0, IGNORE_INDEX)
        embedding = backbone.get_input_embeddings().weight

        def project(hidden: torch.Tensor) -> torch.Tensor:
            return F.linear(hidden, embedding, self.bias)  # …×H -> …×V

        # No boolean index on an accelerator (the host would wait for the device to count the
        # target tokens): `predicted_token_loss` gathers them on a CPU only.
        loss, accuracy, num_predicted = predicted_token_loss(out.decoder_last_hidden_state, labels, project)
        return ObjectiveOutput(loss=loss, metrics={f"{self.name}_acc": accuracy}, num_predicted_tokens=num_predicted)


def framing(
    ids: torch.Tensor, tokenizer_ids: tuple[int | None, int | None]
) -> tuple[list[int], torch.Tensor, list[int]]:
    """Split a row into (leading [CLS]/<s> if any, body, trailing [SEP]/</s> if any)."""
    cls_id, sep_id = tokenizer_ids
    head = [int(ids[0])] if ids.numel() and cls_id is not None and int(ids[0]) == cls_id else []
    rest = ids[len(head) :]
    tail = [int(rest[-1])] if rest.numel() and sep_id is not None and int(rest[-1]) == sep_id else []
    body = rest[: rest.numel() - len(tail)]
    return head, body, tail
