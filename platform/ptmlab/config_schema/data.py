"""`data` (pre-training corpus and batching), its `corpus` classes (lightning_modules/data/), and
`tokenizer`."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import model_validator

from ptmlab.config_schema.fields import (
    NODE,
    Fraction,
    Name,
    Node,
    NonNegativeInt,
    PositiveInt,
    TargetNode,
    TargetSlot,
    checked,
    in_range,
)


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


class Corpus(TargetNode):
    max_documents: PositiveInt | None = None


class TextFilesCorpus(Corpus):
    path: Name
    pattern: Name = "*.txt"
    paragraph_documents: bool = False
    encoding: Name = "utf-8"


class ParallelTextCorpus(Corpus):
    path: Name
    pattern: Name = "*.tsv"
    encoding: Name = "utf-8"
    separator: Annotated[str, checked(len, "a non-empty string")] = "\t"


class HFDatasetCorpus(Corpus):
    name: Name
    config_name: str | None = None
    split: Name = "train"
    text_field: Name = "text"


CORPORA = {
    "lightning_modules.data.corpus.TextFilesCorpus": TextFilesCorpus,
    "lightning_modules.data.corpus.PythonDocstringCorpus": Corpus,
    "lightning_modules.data.corpus.HFDatasetCorpus": HFDatasetCorpus,
    "lightning_modules.data.parallel.ParallelTextCorpus": ParallelTextCorpus,
}


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
