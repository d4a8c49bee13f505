"""Where corruption functions draw their randomness from: one generator per objective, seeded
from the run's seed and the process rank, saved with the checkpoint, and a separate evaluation
generator so every validation pass sees the same corruption."""

from __future__ import annotations

import os

import torch
from torch import nn


def global_seed() -> int:
    """The run's seed: `pl.seed_everything` records it in PL_GLOBAL_SEED and seeds torch with it."""
    env = os.environ.get("PL_GLOBAL_SEED")
    return int(env) if env is not None else int(torch.initial_seed()) % (2**63)


def _rank() -> int:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank()
    return 0


def _same_device(a: torch.device, b: torch.device) -> bool:
    # "cuda" and "cuda:0" name the same device when 0 is the current one.
    if a.type != b.type:
        return False
    if a.type != "cuda":
        return True
    current = torch.cuda.current_device()
    return (a.index if a.index is not None else current) == (b.index if b.index is not None else current)


class SeededCorruption(nn.Module):
    """Owns the generators corruption functions draw from.

    The training generator is seeded (at the first draw, when the stage has already seeded
    everything) from the global seed plus the process rank, so data-parallel replicas mask
    differently; its state is saved with the module (checkpoint resume continues the stream).
    Evaluation uses a separate generator reset on every switch to eval mode, so each validation
    pass sees the same masks and validation losses are comparable across steps.
    """

    def __init__(self, seed: int | None = None):
        super().__init__()
        self.seed = seed
        self._train_generator: torch.Generator | None = None
        self._eval_generator: torch.Generator | None = None
        self._pending_state: dict | None = None

    def _base_seed(self) -> int:
        return (self.seed if self.seed is not None else global_seed()) + 1009 * _rank()

    def generator(self, device: torch.device) -> torch.Generator:
        """The generator to draw from on `device` (that of the tokens being corrupted)."""
        if self.training:
            if self._train_generator is None or not _same_device(self._train_generator.device, device):
                self._train_generator = torch.Generator(device=device).manual_seed(self._base_seed())
                pending = self._pending_state
                if pending and _same_device(torch.device(pending["device"]), device):
                    self._train_generator.set_state(pending["state"])
                self._pending_state = None
            return self._train_generator
        if self._eval_generator is None or not _same_device(self._eval_generator.device, device):
            self._eval_generator = torch.Generator(device=device).manual_seed(self._base_seed() + 1)
        return self._eval_generator

    def train(self, mode: bool = True):
        if not mode:
            self._eval_generator = None
        return super().train(mode)

    def get_extra_state(self) -> dict:
        if self._train_generator is None:
            return dict(self._pending_state or {})
        return {"device": str(self._train_generator.device), "state": self._train_generator.get_state()}

    def set_extra_state(self, state: dict) -> None:
        self._train_generator = None
        self._pending_state = dict(state) if state else None
