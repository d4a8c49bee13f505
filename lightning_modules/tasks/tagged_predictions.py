"""Token-classification predictions back in the input's terms: one tag per word of the file.

`first_subword_predictions` keeps the head's argmax on each word's first sub-word (B×T -> B×L,
L = task.max_length, -100 elsewhere and in the padding, so batches of any length concatenate).
`word_tags` turns those rows into tag lists as long as the file's sentences: words the encoder
cut off at max_length are tagged `O` (the first label where the tag set has no O).
`write_tagged_predictions` writes every word's input columns with the predicted tag appended as
one more column, a blank line between sentences: conlleval's `token ... gold prediction` layout
for CoNLL files, a CoNLL-U file's ten columns plus the prediction. Written tags are BIO-repaired
(data/tagged.py); the metrics score the raw ones (strict mode is where orphan I- tags show).
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F

from lightning_modules.data.tagged import is_bio, repair_bio
from lightning_modules.data.task_data import Split
from lightning_modules.tasks.spec import TaskSpec
from lightning_modules.tasks.token_encoding import IGNORE


def first_subword_predictions(logits: torch.Tensor, batch: dict[str, torch.Tensor], max_length: int) -> torch.Tensor:
    preds = logits.detach().argmax(-1)  # B×T×C -> B×T
    preds = preds.masked_fill(~batch["word_start"], IGNORE)
    return F.pad(preds, (0, int(max_length) - preds.size(1)), value=IGNORE).cpu()  # B×T -> B×L


def fallback_tag(spec: TaskSpec) -> str:
    return "O" if "O" in spec.labels else spec.labels[0]


def word_tags(spec: TaskSpec, split: Split, preds: torch.Tensor) -> list[list[str]]:
    """N×L first-sub-word predictions (split order) -> each sentence's predicted tags."""
    if len(preds) != len(split.examples):
        raise ValueError(f"{len(preds)} prediction rows for {len(split.examples)} sentences of {split.name}")
    out = []
    for row, ex in zip(preds, split.examples, strict=True):
        tags = [spec.labels[int(i)] for i in row[row != IGNORE]]
        out.append(tags + [fallback_tag(spec)] * (len(ex.words) - len(tags)))
    return out


def gold_tags(spec: TaskSpec, split: Split) -> list[list[str]]:
    return [[spec.labels[int(i)] for i in ex.label] for ex in split.examples]


def write_tagged_predictions(path: str | Path, split: Split, tags: list[list[str]]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for ex, sentence in zip(split.examples, tags, strict=True):
            if all(is_bio(t) for t in sentence):
                sentence = repair_bio(sentence)
            for cols, tag in zip(ex.columns, sentence, strict=True):
                f.write("\t".join((*cols, tag)) + "\n")
            f.write("\n")
    return path
