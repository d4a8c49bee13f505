"""Question + context → windows of sub-words for extractive QA, the Hugging Face `run_qa.py`
recipe: the question first, the context second and the only part truncated; a context longer
than `max_length` is split by the fast tokenizer itself (`return_overflowing_tokens`) into
windows that overlap by `doc_stride` sub-words, each window knowing its question
(`overflow_to_sample_mapping`) and, for every context sub-word, its character span in the
context (`return_offsets_mapping`; -1 on the question, the special tokens and the padding).

Labels (training): the first gold answer's first and last sub-word in the window, or the first
position (CLS) twice when the answer is not wholly inside the window or the question has none
(SQuAD v2.0). Every window of a question is one training row.

Batches (padded on the right to the longest window):
  input_ids, attention_mask, token_type_ids   B×T
  offsets        B×T×2  character [start, end) of each context sub-word, -1 elsewhere
  pool_index     B      0 (unused by the span head; kept so every batch has the same keys)
  example_index  B      position of the window's question in its split
  labels         B×2    start and end position; absent when unlabelled
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from lightning_modules.data.padding import padded_tokens
from lightning_modules.data.squad_json import Question
from lightning_modules.data.task_data import Split
from ptmlab.contracts import ConfigError

CLS_INDEX = 0  # where a window without the answer points its start and end
NO_OFFSET = (-1, -1)


class QuestionContextEncoder:
    def __init__(self, tokenizer, *, max_length: int = 384, doc_stride: int = 128):
        if not getattr(tokenizer, "is_fast", False):
            raise ConfigError(
                "span extraction needs a fast (Rust) tokenizer: its offset mapping gives each "
                f"sub-word's characters; {type(tokenizer).__name__} has none (tokenizer)"
            )
        if not 0 <= int(doc_stride) < int(max_length):
            raise ConfigError(f"task.doc_stride={doc_stride} must be >= 0 and below task.max_length={max_length}")
        self.tokenizer, self.max_length, self.doc_stride = tokenizer, int(max_length), int(doc_stride)
        self.pad_id = next(i for i in (tokenizer.pad_token_id, tokenizer.eos_token_id, 0) if i is not None)

    def encode(self, pairs: Sequence[Sequence[str]]) -> list[dict]:
        """(question, context) pairs -> windows, each with the `example_index` of its pair."""
        pairs = [tuple(p) for p in pairs]
        if not pairs:
            return []
        questions = [q.lstrip() for q, _ in pairs]
        self._check_room(questions)
        enc = self.tokenizer(
            questions,
            [c for _, c in pairs],
            truncation="only_second",
            max_length=self.max_length,
            stride=self.doc_stride,
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
            return_token_type_ids=True,
            return_attention_mask=False,
        )
        out = []
        for i, ids in enumerate(enc["input_ids"]):
            sequence = enc.sequence_ids(i)
            offsets = [
                tuple(o) if s == 1 else NO_OFFSET for o, s in zip(enc["offset_mapping"][i], sequence, strict=True)
            ]
            out.append(
                {
                    "input_ids": ids,
                    "token_type_ids": enc["token_type_ids"][i],
                    "offsets": offsets,
                    "example_index": int(enc["overflow_to_sample_mapping"][i]),
                }
            )
        return out

    def _check_room(self, questions: list[str]) -> None:
        """A window must hold more context than the overlap (the tokenizer panics otherwise)."""
        lengths = [len(ids) for ids in self.tokenizer(questions, add_special_tokens=False)["input_ids"]]
        room = self.max_length - max(lengths) - self.tokenizer.num_special_tokens_to_add(pair=True)
        if room <= self.doc_stride:
            raise ConfigError(
                f"the longest question has {max(lengths)} sub-words: task.max_length={self.max_length} "
                f"leaves {room} for the context, not more than task.doc_stride={self.doc_stride} "
                "(raise task.max_length or lower task.doc_stride)"
            )

    def encode_split(self, split: Split) -> list[dict]:
        items = self.encode([q.texts for q in split.examples])
        if split.has_labels:
            for item in items:
                item["label"] = answer_positions(item["offsets"], split.examples[item["example_index"]])
        return items

    def collate(self, items: list[dict]) -> dict[str, torch.Tensor]:
        batch = padded_tokens(items, self.pad_id)
        length = batch["input_ids"].size(1)
        offsets = torch.full((len(items), length, 2), -1, dtype=torch.long)
        for i, x in enumerate(items):
            offsets[i, : len(x["offsets"])] = torch.tensor(x["offsets"], dtype=torch.long)
        batch["offsets"] = offsets
        batch["pool_index"] = torch.zeros(len(items), dtype=torch.long)
        batch["example_index"] = torch.tensor([x["example_index"] for x in items], dtype=torch.long)
        if "label" in items[0]:
            batch["labels"] = torch.tensor([x["label"] for x in items], dtype=torch.long)
        return batch


def answer_positions(offsets: Sequence[tuple[int, int]], question: Question) -> tuple[int, int]:
    """(start, end) sub-word positions of the first gold answer inside this window, or CLS twice."""
    context = [t for t, o in enumerate(offsets) if o != NO_OFFSET]
    if not question.answers or not context:
        return CLS_INDEX, CLS_INDEX
    answer = question.answers[0]
    first, last = context[0], context[-1]
    if offsets[first][0] > answer.start or offsets[last][1] < answer.end:
        return CLS_INDEX, CLS_INDEX
    start = next(t for t in range(last, first - 1, -1) if offsets[t][0] <= answer.start)
    end = next(t for t in range(first, last + 1) if offsets[t][1] >= answer.end)
    return start, end
