"""`data` (pre-training corpus and batching; its `corpus` node is declared by its class in
ptmlab.methods.readers) and `tokenizer`."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import model_validator

from ptmlab.methods.fields import NODE, Fraction, Name, Node, NonNegativeInt, PositiveInt, TargetSlot, in_range


class DataNode(Node):
    name: Name
    corpus: TargetSlot
    # lightning_modules/data/pretrain_examples.py CONSTRUCTIONS; ptmlab.contracts.objective_checks PAIR_NEGATIVES
    construction: Literal["packed", "line_by_line", "segment_pairs"] = "packed"
    pair_negative: Literal["random_document", "swap", "none"] = "random_document"
    block_size: Annotated[int, in_range(3, what="an integer")] = 128  # [CLS] x [SEP] at the least
    batch_size: PositiveInt = 32
    val_fraction: Fraction = 0.02
    num_workers: NonNegativeInt = 0


class TokenizerNode(Node):
    """lightning_modules/data/tokenizer.py: trained on the corpus (cached by these settings) or
    loaded (`kind: pretrained`, `path`)."""

    name: Name
    kind: Literal["wordpiece", "bpe", "unigram", "pretrained"]
    vocab_size: PositiveInt
    min_frequency: NonNegativeInt = 2
    lowercase: bool = False
    path: str | None = None

    @model_validator(mode="after")
    def _pretrained_path(self):
        if self.kind == "pretrained" and not self.path:
            raise ValueError(f"{NODE}.kind=pretrained needs {NODE}.path (a Hugging Face name or folder)")
        return self
