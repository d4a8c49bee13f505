"""The training loop of the plain-PyTorch references (bench/ner_reference.py, bench/qa_reference.py):
the Hugging Face Trainer's recipe written out with nothing of ptmlab, so ptmlab's thresholds are
set from what that recipe reaches.

  - AdamW (betas 0.9/0.999, eps 1e-8), weight decay on matrices only, as the Trainer;
  - a linear schedule whose warm-up is round(warmup_ratio × steps) steps, as ptmlab's
    `optim.build_scheduler` rounds it (the Trainer takes the ceiling: 22 against 21 at 213 steps);
  - the seed set again once the model is built, as the Trainer's constructor (set_seed) and
    ptmlab's StageRun do, so the dropout draws start at the seed whatever the model drew;
  - the Trainer's `group_by_length` order: transformers' LengthGroupedSampler, its permutation
    from a generator of its own (seed + epoch), so the dropout draws do not move it;
  - gradient clipping at 1.0.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import numpy as np
import torch
from torch.utils.data import DataLoader
from transformers import get_linear_schedule_with_warmup
from transformers.trainer_pt_utils import LengthGroupedSampler


def seed_all(seed: int) -> None:
    random.seed(seed), np.random.seed(seed), torch.manual_seed(seed)


def train_like_the_trainer(
    model: torch.nn.Module,
    items: list[dict],
    collate: Callable[[list[dict]], dict],
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    weight_decay: float,
    warmup_ratio: float,
    seed: int,
) -> tuple[int, float]:
    """Trains `model` (its forward returns `.loss`) on `items` in place; returns the optimizer steps
    taken and the seconds they took."""
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=lr,
        betas=(0.9, 0.999),
        eps=1e-8,
    )
    steps = -(-len(items) // batch_size) * epochs
    scheduler = get_linear_schedule_with_warmup(optimizer, round(warmup_ratio * steps), max(steps, 1))
    lengths = [len(x["input_ids"]) for x in items]
    seed_all(seed)
    started = time.perf_counter()
    model.train()
    for epoch in range(epochs):
        sampler = LengthGroupedSampler(
            batch_size, lengths=lengths, generator=torch.Generator().manual_seed(seed + epoch)
        )
        for batch in DataLoader(items, batch_size=batch_size, sampler=sampler, collate_fn=collate):
            loss = model(**batch).loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
    return steps, time.perf_counter() - started
