"""A LightningDataModule over one loaded task: encoded once, padded per batch."""

from __future__ import annotations

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader

from lightning_modules.tasks.encoding import PairEncoder
from lightning_modules.tasks.spec import LoadedTask


class TaskDataModule(pl.LightningDataModule):
    """train: shuffled (seeded); val: one loader per eval split (`split_names_val` order, so
    `dataloader_idx` i is split_names_val[i]); predict: eval splits, then test splits."""

    def __init__(self, task: LoadedTask, tokenizer, *, causal: bool, batch_size: int = 32,
                 eval_batch_size: int | None = None, num_workers: int = 0, seed: int = 0):
        super().__init__()
        self.task = task
        self.encoder = PairEncoder(tokenizer, causal=causal, max_length=task.spec.max_length)
        self.batch_size, self.eval_batch_size = int(batch_size), int(eval_batch_size or batch_size)
        self.num_workers, self.seed = num_workers, seed
        self.split_names_val = [s.name for s in task.eval_splits]
        self.split_names_predict = self.split_names_val + [s.name for s in task.test_splits]
        self._encoded: dict[str, list[dict]] = {}

    def encoded(self, split_name: str) -> list[dict]:
        if split_name not in self._encoded:
            self._encoded[split_name] = self.encoder.encode_split(self.task.data.splits[split_name])
        return self._encoded[split_name]

    def _loader(self, split_name: str, shuffle: bool, batch_size: int) -> DataLoader:
        generator = torch.Generator().manual_seed(self.seed) if shuffle else None
        return DataLoader(self.encoded(split_name), batch_size=batch_size, shuffle=shuffle,
                          collate_fn=self.encoder.collate, num_workers=self.num_workers, generator=generator)

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.task.data.train_split, True, self.batch_size)

    def val_dataloader(self) -> list[DataLoader]:
        return [self._loader(name, False, self.eval_batch_size) for name in self.split_names_val]

    def predict_dataloader(self) -> list[DataLoader]:
        return [self._loader(name, False, self.eval_batch_size) for name in self.split_names_predict]
