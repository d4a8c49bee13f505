"""Extractive-QA predictions back in the input's terms: start/end logits of every window →
one answer per question, as characters of its context (the post-processing of Hugging Face's
`run_qa.py`, `postprocess_qa_predictions`).

`SpanWindows` holds what the head gave each window (start and end logits padded to
`task.max_length`), the window's character offsets and its question. `best_spans` takes, per
question and over all its windows, the `task.n_best_size` best starts and ends among the context
sub-words, keeps the pairs with start ≤ end and at most `task.max_answer_length` sub-words, and
returns the best-scoring pair (start logit + end logit) mapped to the context's characters; its
null score is the lowest CLS start + end logit over the question's windows. `score_answers` scores
them (tasks/span_metrics.py): on v2.0 data the no-answer score is null − best, and the no-answer
threshold is `task.no_answer_threshold` or, left null, the one that maximises F1 on the split.
`write_span_predictions` writes one JSON line per question: id, predicted answer, gold answers.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from lightning_modules.data.squad_json import is_v2
from lightning_modules.data.task_data import Split
from lightning_modules.tasks.span_encoding import CLS_INDEX
from lightning_modules.tasks.span_metrics import span_metrics
from lightning_modules.tasks.spec import TaskSpec


@dataclass
class SpanWindows:
    logits: torch.Tensor  # W×L×2 start and end logits (float32, CPU), L = task.max_length, zero-padded
    offsets: torch.Tensor  # W×L×2 character [start, end) of context sub-words, -1 elsewhere
    example_index: torch.Tensor  # W: the window's question in its split

    @classmethod
    def from_batch(cls, logits: torch.Tensor, batch: dict[str, torch.Tensor], max_length: int) -> SpanWindows:
        pad = int(max_length) - logits.size(1)
        return cls(
            F.pad(logits.detach().float(), (0, 0, 0, pad)).cpu(),  # B×T×2 -> B×L×2
            F.pad(batch["offsets"], (0, 0, 0, pad), value=-1).cpu(),
            batch["example_index"].cpu(),
        )

    @classmethod
    def cat(cls, parts: list[SpanWindows]) -> SpanWindows:
        return cls(*(torch.cat([getattr(p, k) for p in parts]) for k in ("logits", "offsets", "example_index")))


@dataclass(frozen=True)
class SpanAnswer:
    text: str  # the best non-null span ("" when no window holds a valid one)
    start: int  # its first character in the context (-1: none)
    score: float  # its start + end logit
    null_score: float  # the lowest CLS start + end logit over the question's windows

    @property
    def no_answer_score(self) -> float:
        return self.null_score - self.score if self.start >= 0 else math.inf


def best_spans(spec: TaskSpec, split: Split, windows: SpanWindows) -> list[SpanAnswer]:
    by_question: dict[int, list[int]] = {}
    for w, i in enumerate(windows.example_index.tolist()):
        by_question.setdefault(i, []).append(w)
    if sorted(by_question) != list(range(len(split.examples))):
        raise ValueError(f"windows cover {len(by_question)} of the {len(split.examples)} questions of {split.name}")
    return [_best_span(spec, split.examples[i].context, windows, by_question[i]) for i in range(len(split.examples))]


def _best_span(spec: TaskSpec, context: str, windows: SpanWindows, rows: list[int]) -> SpanAnswer:
    best, null = (-math.inf, -1, -1, -1), math.inf  # (score, window, start, end)
    for w in rows:
        start, end = windows.logits[w, :, 0], windows.logits[w, :, 1]
        null = min(null, float(start[CLS_INDEX] + end[CLS_INDEX]))
        inside = windows.offsets[w, :, 0] >= 0
        k = min(int(spec.n_best_size), int(inside.sum()))
        if k == 0:
            continue
        starts = start.masked_fill(~inside, -math.inf).topk(k).indices
        ends = end.masked_fill(~inside, -math.inf).topk(k).indices
        length = ends.view(1, -1) - starts.view(-1, 1)  # k×k: end - start
        scores = start[starts].view(-1, 1) + end[ends].view(1, -1)  # k×k
        scores = scores.masked_fill((length < 0) | (length >= int(spec.max_answer_length)), -math.inf)
        flat = int(scores.argmax())
        score = float(scores.view(-1)[flat])
        if score > best[0]:
            best = (score, w, int(starts[flat // k]), int(ends[flat % k]))
    score, w, s, e = best
    if w < 0:
        return SpanAnswer("", -1, -math.inf, null)
    first, last = int(windows.offsets[w, s, 0]), int(windows.offsets[w, e, 1])
    return SpanAnswer(context[first:last], first, score, null)


def answer_texts(answers: list[SpanAnswer], threshold: float | None) -> list[str]:
    """The final answers: "" where the no-answer score is above the threshold (None: always answer)."""
    return [a.text if threshold is None or a.no_answer_score <= threshold else "" for a in answers]


def score_answers(spec: TaskSpec, split: Split, answers: list[SpanAnswer]) -> dict[str, float]:
    """`exact_match` / `f1` (0–1) of the answers; v2.0: at the no-answer threshold, returned as
    `no_answer_threshold`."""
    v2 = is_v2(split)
    golds = [[a.text for a in q.answers] for q in split.examples]
    scores = [a.no_answer_score for a in answers] if v2 else None
    return span_metrics(
        spec.metrics,
        golds,
        [a.text for a in answers],
        v2=v2,
        no_answer_scores=scores,
        threshold=spec.no_answer_threshold,
    )


def write_span_predictions(path: str | Path, split: Split, answers: list[SpanAnswer], threshold: float | None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    v2 = is_v2(split)
    with path.open("w", encoding="utf-8") as f:
        for q, a, text in zip(split.examples, answers, answer_texts(answers, threshold if v2 else None), strict=True):
            row = {"id": q.id, "prediction": text, "gold": [g.text for g in q.answers]}
            if v2:
                row["no_answer_score"] = a.no_answer_score if math.isfinite(a.no_answer_score) else None
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path
