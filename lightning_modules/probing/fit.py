"""The small training loop every probe shares: many small fits, so plain PyTorch (no Trainer).

A probe is trained for a fixed number of epochs on the training split and scored once on the
evaluation split: no early stopping on the split it is scored on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn


@dataclass
class FitSettings:
    epochs: int = 6
    lr: float = 3e-3
    batch_size: int = 512
    weight_decay: float = 0.0
    seed: int = 0

    @classmethod
    def from_cfg(cls, node, seed: int) -> FitSettings:
        return cls(
            epochs=int(node.epochs),
            lr=float(node.lr),
            batch_size=int(node.batch_size),
            weight_decay=float(node.get("weight_decay", 0.0) or 0.0),
            seed=seed,
        )


@contextmanager
def one_thread() -> Iterator[None]:
    """Run a probe's fit and scoring on one intra-op thread. A probe step is a few small matmuls
    (512 × 384 @ 384 × 17, or 20 sentences × rank 64): more threads only add synchronisation,
    and where other processes share the cores (a worker beside its API, a shared node) their
    spin-waits made each step 2.5-3x slower than one thread (measured: 100 distance-probe steps
    0.17-0.2 s on one thread, 0.49-0.59 s on two, on a loaded 2-core machine). Extraction, the
    one large computation, keeps every thread."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def length_buckets(lengths: list[int], batch_size: int) -> list[torch.Tensor]:
    """Batches of examples of similar length (sentence-level probes pad to the longest)."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    return [torch.tensor(order[i : i + batch_size]) for i in range(0, len(order), batch_size)]


def fit(
    model: nn.Module,
    n_examples: int,
    loss_of_batch: Callable[[Any], torch.Tensor],
    settings: FitSettings,
    buckets: list | None = None,
) -> nn.Module:
    """Adam over shuffled minibatches of example indices, or over `buckets` (prepared batches of
    any kind) in a shuffled order; `loss_of_batch(batch)` gives the loss."""
    generator = torch.Generator().manual_seed(settings.seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.lr, weight_decay=settings.weight_decay)
    model.train()
    for _ in range(settings.epochs):
        if buckets is not None:
            batches = [buckets[i] for i in torch.randperm(len(buckets), generator=generator)]
        else:
            order = torch.randperm(n_examples, generator=generator)
            batches = [
                order[start : start + settings.batch_size] for start in range(0, n_examples, settings.batch_size)
            ]
        for batch in batches:
            loss = loss_of_batch(batch)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    model.eval()
    return model
