"""Extractive-QA metrics exactly as the official SQuAD evaluation scripts define them
(`evaluate-v1.1.py`, `evaluate-v2.0.py`), on a 0–1 scale like every other ptmlab metric (the
scripts print 100×):

  normalisation   lowercase, drop punctuation (string.punctuation), drop the articles a/an/the,
                  collapse whitespace;
  exact_match     normalised prediction == normalised gold;
  f1              bag-of-tokens F1 between the normalised prediction and gold;
  each question   the maximum over its gold answers; the split: the mean over its questions.

v1.1 and v2.0 differ only at the edges, and each is followed where it applies: v2.0 drops gold
answers that normalise to nothing (a question left without any has the gold answer ""), and its F1
of an empty prediction or gold is 1 when both are empty, else 0 (v1.1: 0 whenever nothing is in
common). On v2.0 data a prediction of "" means "no answer".

No-answer threshold (v2.0): each question has a no-answer score (tasks/span_answers.py: the null
span's score minus the best span's); the answer is "" when the score is above the threshold.
`best_threshold` is the official script's `find_best_thresh` run on the F1 scores (ties of a score
taken together): the threshold that maximises F1 on the split it is given.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

from ptmlab.contracts import ConfigError

SPAN_METRICS = ("exact_match", "f1")
SPAN_METRIC_MODES = {
    "exact_match": "official SQuAD exact match of normalised answers, max over gold answers, 0-1 (the script prints 100x)",
    "f1": "official SQuAD token F1 of normalised answers, max over gold answers, 0-1 (the script prints 100x)",
}
ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    text = "".join(ch for ch in text.lower() if ch not in PUNCTUATION)
    return " ".join(ARTICLES.sub(" ", text).split())


def exact_score(prediction: str, gold: str) -> int:
    return int(normalize_answer(prediction) == normalize_answer(gold))


def f1_score(prediction: str, gold: str, *, v2: bool) -> float:
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if v2 and (not pred or not ref):
        return float(pred == ref)
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def question_scores(prediction: str, golds: Sequence[str], *, v2: bool) -> tuple[float, float]:
    """(exact match, F1) of one question: the maximum over its gold answers."""
    if v2:
        golds = [g for g in golds if normalize_answer(g)] or [""]
    if not golds:
        raise ValueError("a v1.1 question needs at least one gold answer")
    return (float(max(exact_score(prediction, g) for g in golds)), max(f1_score(prediction, g, v2=v2) for g in golds))


def best_threshold(
    f1: Sequence[float], no_answer_scores: Sequence[float], has_answer: Sequence[bool], answered: Sequence[bool]
) -> float:
    """The official `find_best_thresh` on per-question F1 of the best non-null answers: start from
    "no answer everywhere", answer the questions in increasing no-answer score and keep the threshold
    where the total is highest. `answered`: the best non-null answer is non-empty."""
    total = best = float(sum(not h for h in has_answer))
    order = sorted(range(len(f1)), key=lambda i: no_answer_scores[i])
    threshold = no_answer_scores[order[0]] - 1.0 if order else 0.0  # below every score: no answer anywhere
    for n, i in enumerate(order):
        total += f1[i] if has_answer[i] else (-1.0 if answered[i] else 0.0)
        last_of_tie = n + 1 == len(order) or no_answer_scores[order[n + 1]] != no_answer_scores[i]
        if last_of_tie and total > best:
            best, threshold = total, float(no_answer_scores[i])
    return threshold


def span_metrics(
    names: Sequence[str],
    golds: Sequence[Sequence[str]],
    predictions: Sequence[str],
    *,
    v2: bool,
    no_answer_scores: Sequence[float] | None = None,
    threshold: float | None = None,
) -> dict[str, float]:
    """Split-level `exact_match` and `f1` (0–1). v2.0 with `no_answer_scores`: a prediction whose score
    is above `threshold` becomes "" (no answer); `threshold=None` chooses it on this split
    (`best_threshold`) and returns it as `no_answer_threshold`."""
    unknown = [n for n in names if n not in SPAN_METRICS]
    if unknown:
        raise ConfigError(
            f"unknown span-extraction metric '{unknown[0]}' (task.metrics; valid: {', '.join(SPAN_METRICS)})"
        )
    if len(golds) != len(predictions) or not golds:
        raise ValueError(f"{len(predictions)} predictions for {len(golds)} questions")
    out: dict[str, float] = {}
    if v2 and no_answer_scores is not None:
        if threshold is None:
            f1 = [question_scores(p, g, v2=True)[1] for p, g in zip(predictions, golds, strict=True)]
            has_answer = [bool(g) for g in golds]
            threshold = best_threshold(f1, no_answer_scores, has_answer, [bool(p) for p in predictions])
        predictions = ["" if s > threshold else p for p, s in zip(predictions, no_answer_scores, strict=True)]
        out["no_answer_threshold"] = float(threshold)
    scores = [question_scores(p, g, v2=v2) for p, g in zip(predictions, golds, strict=True)]
    means = {"exact_match": sum(s[0] for s in scores) / len(scores), "f1": sum(s[1] for s in scores) / len(scores)}
    return {**{n: means[n] for n in names}, **out}
