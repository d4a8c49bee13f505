"""The pre-training datamodule: corpus → tokenizer (cached) → examples (cached) → batches.

Batches are dicts of B×T tensors: input_ids, attention_mask (1 = token, 0 = pad) and, for
pair construction, token_type_ids and pair_label. Objectives corrupt them in the step.
"""

from __future__ import annotations

from pathlib import Path

import lightning.pytorch as pl
import torch
from omegaconf import DictConfig
from torch.utils.data import DataLoader, Dataset

from lightning_modules.data.corpus import Corpus
from lightning_modules.data.corpus_tokenizer import CorpusTokenizer, load_corpus_tokenizer
from lightning_modules.data.padding import padded_tokens
from lightning_modules.data.pretrain_examples import (
    VAL_SPLIT_SEED,
    cache_examples,
    construction_of,
    examples_cache_path,
)
from ptmlab.contracts import DataError


class ExampleDataset(Dataset):
    def __init__(self, examples):
        self.examples = examples

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, i):
        return self.examples[i]


def pad_collate(pad_id: int):
    def collate(items) -> dict[str, torch.Tensor]:
        if isinstance(items[0], torch.Tensor):  # packed blocks: all the same length
            ids = torch.stack(items)
            return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        if isinstance(items[0], list):
            items = [{"input_ids": x} for x in items]
        padded = padded_tokens(items, pad_id)
        batch = {"input_ids": padded["input_ids"], "attention_mask": padded["attention_mask"]}
        if "token_type_ids" in items[0]:
            batch["token_type_ids"] = padded["token_type_ids"]
            batch["pair_label"] = torch.tensor([x["label"] for x in items], dtype=torch.long)
        return batch

    return collate


class PretrainDataModule(pl.LightningDataModule):
    def __init__(
        self,
        data_cfg: DictConfig,
        tokenizer_cfg: DictConfig,
        cache_dir: str | Path,
        seed: int = 0,
        corpus_tokenizer: CorpusTokenizer | None = None,  # what the preflight read; None: read here
    ):
        super().__init__()
        self.data_cfg, self.tokenizer_cfg = data_cfg, tokenizer_cfg
        self.cache_dir = Path(cache_dir)
        self.seed = seed
        self.construction = construction_of(data_cfg)
        read = corpus_tokenizer or load_corpus_tokenizer(data_cfg, tokenizer_cfg, self.cache_dir)
        self.corpus: Corpus = read.corpus
        self.fingerprint = read.fingerprint
        self.tokenizer = read.tokenizer
        self.train_set: ExampleDataset | None = None
        self.val_set: ExampleDataset | None = None
        self.num_tokens = 0

    def files(self) -> list[Path]:
        return self.corpus.files()

    def prepare_data(self) -> None:
        cache_examples(self.data_cfg, self.tokenizer, self.corpus, self.fingerprint, self.cache_dir)

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        self.prepare_data()
        # Tensors, lists, dicts and numbers only: a cache file is never a way to run code.
        examples = torch.load(
            examples_cache_path(self.data_cfg, self.tokenizer, self.fingerprint, self.cache_dir), weights_only=True
        )
        n = len(examples)
        if n < 2:
            raise DataError(
                f"corpus gives {n} example(s) at data.block_size={self.data_cfg.block_size}; need at least 2 (train + val)"
            )
        order = torch.randperm(n, generator=torch.Generator().manual_seed(VAL_SPLIT_SEED)).tolist()
        n_val = max(1, int(round(n * float(self.data_cfg.val_fraction))))
        val_idx, train_idx = order[:n_val], order[n_val:]
        if isinstance(examples, torch.Tensor):  # packed: N×T
            train, val = list(examples[train_idx]), list(examples[val_idx])
            self.num_tokens = int(examples.numel())
        else:
            train, val = [examples[i] for i in train_idx], [examples[i] for i in val_idx]
            self.num_tokens = sum(len(x["input_ids"] if isinstance(x, dict) else x) for x in examples)
        self.train_set, self.val_set = ExampleDataset(train), ExampleDataset(val)

    def _loader(self, dataset, shuffle: bool) -> DataLoader:
        gen = torch.Generator().manual_seed(self.seed)
        workers = int(self.data_cfg.get("num_workers", 0))
        # Pinned batches reach a GPU asynchronously; workers stay up between epochs and validations.
        return DataLoader(
            dataset,
            batch_size=int(self.data_cfg.batch_size),
            shuffle=shuffle,
            collate_fn=pad_collate(self.tokenizer.pad_token_id),
            generator=gen,
            num_workers=workers,
            persistent_workers=workers > 0,
            pin_memory=torch.cuda.is_available(),
            drop_last=shuffle and len(dataset) > int(self.data_cfg.batch_size),
        )

    def train_dataloader(self) -> DataLoader:
        self.setup()
        return self._loader(self.train_set, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        self.setup()
        return self._loader(self.val_set, shuffle=False)
