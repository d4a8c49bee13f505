"""Sequence construction for pre-training: pure functions from tokenized documents to
fixed-length examples.

- `packed_blocks`: documents concatenated (a [SEP]/</s> between them) and cut into contiguous
  blocks of `block_size` tokens, each framed as [CLS] … [SEP] (RoBERTa's FULL-SENTENCES).
- `line_blocks`: one example per line, framed and truncated to `block_size`, padded at batch time.
- `segment_pairs`: the hook for sentence-pair objectives (NSP, SOP): consecutive segments of
  one document as (A, B) with `is_next`; NSP negatives take B from another document.
"""

from __future__ import annotations

import random

import torch

from ptmlab.contracts import DataError


def packed_blocks(documents: list[list[int]], block_size: int, cls_id: int, sep_id: int) -> torch.Tensor:
    """documents: one flat list of token ids per document. Returns N×block_size int64."""
    body = block_size - 2  # room for [CLS] and [SEP]
    if body < 1:
        raise DataError(f"data.block_size={block_size} is too small (needs at least 3)")
    stream: list[int] = []
    for doc in documents:
        if doc:
            stream.extend(doc)
            stream.append(sep_id)
    n_blocks = len(stream) // body
    if n_blocks == 0:
        raise DataError(f"corpus has {len(stream)} tokens, fewer than one block of data.block_size={block_size}")
    flat = torch.tensor(stream[: n_blocks * body], dtype=torch.long).view(n_blocks, body)  # N×(T-2)
    cls = torch.full((n_blocks, 1), cls_id, dtype=torch.long)
    sep = torch.full((n_blocks, 1), sep_id, dtype=torch.long)
    return torch.cat([cls, flat, sep], dim=1)  # N×T


def line_blocks(
    lines: list[list[int]], block_size: int, cls_id: int, sep_id: int, min_tokens: int = 1
) -> list[list[int]]:
    """One framed, truncated example per line (variable length; padded by the collator)."""
    out = [[cls_id, *ids[: block_size - 2], sep_id] for ids in lines if len(ids) >= min_tokens]
    if not out:
        raise DataError(f"corpus has no line with at least {min_tokens} token(s) for data.construction=line_by_line")
    return out


def truncate_pair(a: list[int], b: list[int], budget: int) -> tuple[list[int], list[int]]:
    """Trim the longer segment one token at a time until both fit (BERT's truncate_seq_pair)."""
    while len(a) + len(b) > budget:
        if len(a) >= len(b):
            a.pop()
        else:
            b.pop()
    return a, b


def segment_pairs(
    documents: list[list[list[int]]],
    block_size: int,
    cls_id: int,
    sep_id: int,
    rng: random.Random,
    negative: str = "random_document",
) -> list[dict]:
    """Sentence-pair examples from consecutive segments of the same document.

    documents: per document, its lines as token-id lists. Each example is
    {input_ids, token_type_ids, label} where label=1 means B follows A in the original order.
    negative="random_document" (NSP: B from another document) or "swap" (SOP: A and B swapped),
    or "none" (every pair as it is: parallel text for TLM, where a pair is a sentence and its
    translation).
    """
    budget = block_size - 3  # [CLS] A [SEP] B [SEP]
    examples = []
    multi_docs = [d for d in documents if len(d) >= 2]
    if not multi_docs:
        raise DataError("sentence-pair construction needs documents with at least two lines")
    for d_idx, doc in enumerate(documents):
        i = 0
        while i + 1 < len(doc):
            a, b = doc[i], doc[i + 1]
            label = 1
            if negative != "none" and rng.random() < 0.5:
                label = 0
                if negative == "swap":
                    a, b = b, a
                else:
                    other = rng.randrange(len(documents))
                    if len(documents) > 1:
                        while other == d_idx:
                            other = rng.randrange(len(documents))
                    b = rng.choice(documents[other]) if documents[other] else b
            a, b = truncate_pair(list(a), list(b), budget)
            ids = [cls_id, *a, sep_id, *b, sep_id]
            types = [0] * (len(a) + 2) + [1] * (len(b) + 1)
            examples.append({"input_ids": ids, "token_type_ids": types, "label": label})
            i += 2
    return examples
