"""A LightningDataModule over one loaded task: encoded once, padded per batch; training batches
optionally grouped by length (`stage.group_by_length`) so a batch pads little."""

from __future__ import annotations

from collections.abc import Iterator

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, Sampler

from lightning_modules.tasks.encoding import PairEncoder, encoded_length, longest_first
from lightning_modules.tasks.spec import LoadedTask


class LengthGroupedBatches(Sampler[list[int]]):
    """Training batches of similar lengths, still random: Hugging Face's `group_by_length`
    order (transformers' `LengthGroupedSampler`: a permutation cut into mega-batches of up to 50
    batches, each sorted longest first, the longest example moved to the first batch) cut into
    batches as the Trainer's DataLoader cuts it. The permutation is drawn from its own generator,
    seeded by seed + epoch, so the dropout stream does not move it and a resumed run redraws it.
    Every example appears once per epoch; the last batch may be short."""

    def __init__(self, lengths: list[int], batch_size: int, seed: int = 0):
        self.lengths, self.batch_size, self.seed = list(lengths), int(batch_size), int(seed)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:  # Lightning calls it at each epoch start
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return -(-len(self.lengths) // self.batch_size)

    def __iter__(self) -> Iterator[list[int]]:
        from transformers.trainer_pt_utils import LengthGroupedSampler  # deferred: a heavy import

        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        order = list(LengthGroupedSampler(self.batch_size, lengths=self.lengths, generator=generator))
        return iter([order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)])


class TaskDataModule(pl.LightningDataModule):
    """train: shuffled (seeded); val: one loader per eval split (`split_names_val` order, so
    `dataloader_idx` i is split_names_val[i]); predict: eval splits, then test splits. Val and
    predict loaders read longest first (tasks/encoding.py `longest_first`; a question's windows
    together, in the order they were cut): their batches carry `example_index`, and whoever gathers
    rows puts them back in split order (`in_split_order`; a span task's windows are grouped by it)."""

    def __init__(
        self,
        task: LoadedTask,
        tokenizer,
        *,
        causal: bool,
        batch_size: int = 32,
        eval_batch_size: int | None = None,
        num_workers: int = 0,
        seed: int = 0,
        group_by_length: bool = False,
        encoder: PairEncoder | None = None,
    ):
        super().__init__()
        self.group_by_length = bool(group_by_length)
        self.task = task
        # The model's own encoder when it has one (a prompt template: pooling.input_encoder).
        self.encoder = encoder or PairEncoder(tokenizer, causal=causal, max_length=task.spec.max_length)
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
        items = self.encoded(split_name)
        if shuffle:
            return DataLoader(
                items,
                batch_size=batch_size,
                shuffle=True,
                collate_fn=self.encoder.collate,
                num_workers=self.num_workers,
                generator=torch.Generator().manual_seed(self.seed),
            )
        return DataLoader(
            [items[i] for i in longest_first(items)],
            batch_size=batch_size,
            shuffle=False,
            collate_fn=self.encoder.collate,
            num_workers=self.num_workers,
        )

    def train_dataloader(self) -> DataLoader:
        split = self.task.data.train_split
        if self.group_by_length:
            batches = LengthGroupedBatches(
                [encoded_length(x) for x in self.encoded(split)], self.batch_size, seed=self.seed
            )
            return DataLoader(
                self.encoded(split),
                batch_sampler=batches,
                collate_fn=self.encoder.collate,
                num_workers=self.num_workers,
            )
        return self._loader(split, True, self.batch_size)

    def val_dataloader(self) -> list[DataLoader]:
        return [self._loader(name, False, self.eval_batch_size) for name in self.split_names_val]

    def predict_dataloader(self) -> list[DataLoader]:
        return [self._loader(name, False, self.eval_batch_size) for name in self.split_names_predict]
