"""What a fine-tune got wrong, stored with its run (`predictions/confusion.json` and the summary's
`confusion`), for the job page:

  classification        the confusion matrix (rows gold, columns predicted), each class's precision,
                        recall, F1 and support (scikit-learn), and the eval examples it was most
                        confident about and wrong (the predicted class's probability as `score`)
  token classification  BIO tags: entity-level (seqeval's default chunking, the entity_* metrics'
                        mode): rows are the gold entity types and "O", columns the predicted ones and
                        "O"; a gold entity predicted with the same span lands in its predicted type's
                        column, one no prediction has the same span of is `missed` (column "O"), a
                        predicted entity no gold one has the span of is `spurious` (row "O"); per-type
                        scores are seqeval's. Other tag sets (UPOS, XPOS): word-level, as classification.

`majority_baseline` is the score of always predicting the training set's most frequent class.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import PurePosixPath

import torch

from ptmlab.contracts.summaries import CONFUSION_FILE as CONFUSION_PATH

CONFUSION_FILE = PurePosixPath(CONFUSION_PATH).name  # under the run's predictions/
MISCLASSIFIED_SHOWN = 20
OUTSIDE = "O"  # the entity confusion's row and column for "no entity"


def class_counts(gold: Sequence[int], predicted: Sequence[int], label_names: Sequence[str]) -> dict:
    """The matrix (rows gold, columns predicted) and per-class scores of class indices."""
    from sklearn.metrics import confusion_matrix, precision_recall_fscore_support

    classes = list(range(len(label_names)))
    matrix = confusion_matrix(list(gold), list(predicted), labels=classes)
    precision, recall, f1, support = precision_recall_fscore_support(
        list(gold), list(predicted), labels=classes, zero_division=0
    )
    return {
        "level": "class",
        "labels": [str(name) for name in label_names],
        "matrix": matrix.tolist(),
        "per_class": [
            {
                "label": str(name),
                "precision": float(precision[c]),
                "recall": float(recall[c]),
                "f1": float(f1[c]),
                "support": int(support[c]),
            }
            for c, name in enumerate(label_names)
        ],
    }


def confusion_report(
    logits: torch.Tensor, labels: Sequence[int], label_names: Sequence[str], texts: Sequence[Sequence[str]]
) -> dict:
    """`logits` B×C of the eval split in split order, `labels` its gold class indices, `texts` each
    example's input texts (one or a pair)."""
    probabilities = torch.softmax(logits.to(torch.float64), dim=-1)
    confidence, predicted = probabilities.max(dim=-1)
    gold = torch.as_tensor(list(labels), dtype=torch.long)
    wrong = (predicted != gold).nonzero().flatten().tolist()
    wrong.sort(key=lambda i: -float(confidence[i]))  # the most confident mistakes first
    return {
        **class_counts(gold.tolist(), predicted.tolist(), label_names),
        "misclassified": [
            {
                "index": i,
                "text": " ||| ".join(str(t) for t in texts[i]),
                "gold": str(label_names[int(gold[i])]),
                "predicted": str(label_names[int(predicted[i])]),
                "score": round(float(confidence[i]), 4),
            }
            for i in wrong[:MISCLASSIFIED_SHOWN]
        ],
        "errors": len(wrong),
        "examples": int(gold.numel()),
    }


def tag_confusion(
    label_names: Sequence[str], gold: list[list[str]], predicted: list[list[str]], words: Sequence[Sequence[str]]
) -> dict:
    """A token-classification eval split's confusion: entity-level for a BIO tag set, word-level
    for any other. `gold`/`predicted` are each sentence's word tags, `words` its words."""
    from lightning_modules.data.tagged import is_bio

    if all(is_bio(str(tag)) for tag in label_names) and any(str(tag) != OUTSIDE for tag in label_names):
        return entity_confusion(gold, predicted, words)
    index = {str(tag): i for i, tag in enumerate(label_names)}
    flat_gold = [index[t] for sentence in gold for t in sentence]
    flat_pred = [index[t] for sentence in predicted for t in sentence]
    wrong = [
        (s, w)
        for s, (g, p) in enumerate(zip(gold, predicted, strict=True))
        for w, (a, b) in enumerate(zip(g, p, strict=True))
        if a != b
    ]
    return {
        **class_counts(flat_gold, flat_pred, label_names),
        "level": "word",
        "misclassified": [
            {
                "index": s,
                "text": " ".join(words[s]),
                "word": words[s][w],
                "gold": gold[s][w],
                "predicted": predicted[s][w],
                "score": None,
            }
            for s, w in wrong[:MISCLASSIFIED_SHOWN]
        ],
        "errors": len(wrong),
        "examples": len(flat_gold),
    }


def entity_confusion(gold: list[list[str]], predicted: list[list[str]], words: Sequence[Sequence[str]]) -> dict:
    """Entity-level confusion of BIO-tagged sentences (see the module's docstring)."""
    from seqeval.metrics import classification_report
    from seqeval.metrics.sequence_labeling import get_entities

    cells: Counter[tuple[str, str]] = Counter()
    mistakes: list[dict] = []
    for s, (gold_tags, pred_tags) in enumerate(zip(gold, predicted, strict=True)):
        gold_spans = {(start, end): kind for kind, start, end in get_entities(list(gold_tags))}
        pred_spans = {(start, end): kind for kind, start, end in get_entities(list(pred_tags))}
        for span in sorted(gold_spans.keys() | pred_spans.keys()):
            cell = (gold_spans.get(span, OUTSIDE), pred_spans.get(span, OUTSIDE))
            cells[cell] += 1
            if cell[0] != cell[1]:
                mistakes.append(
                    {
                        "index": s,
                        "text": " ".join(words[s]),
                        "entity": " ".join(words[s][span[0] : span[1] + 1]),
                        "gold": cell[0],
                        "predicted": cell[1],
                        "score": None,
                    }
                )
    types = sorted({kind for pair in cells for kind in pair} - {OUTSIDE})
    labels = [*types, OUTSIDE]
    report = classification_report(gold, predicted, output_dict=True, zero_division=0) if types else {}
    per_type = [
        {
            "label": kind,
            "precision": float(report.get(kind, {}).get("precision", 0.0)),
            "recall": float(report.get(kind, {}).get("recall", 0.0)),
            "f1": float(report.get(kind, {}).get("f1-score", 0.0)),
            "support": int(report.get(kind, {}).get("support", 0)),
        }
        for kind in types
    ]
    return {
        "level": "entity",
        "labels": labels,
        "matrix": [[cells[(g, p)] for p in labels] for g in labels],
        "per_class": per_type,
        "missed": {kind: cells[(kind, OUTSIDE)] for kind in types},
        "spurious": {kind: cells[(OUTSIDE, kind)] for kind in types},
        "misclassified": mistakes[:MISCLASSIFIED_SHOWN],
        "errors": len(mistakes),
        "examples": sum(n for (g, _), n in cells.items() if g != OUTSIDE),
    }


def majority_baseline(
    names: Sequence[str], train_labels: Sequence[int], eval_labels: Sequence[int], num_labels: int
) -> dict[str, float]:
    """Each classification metric of always predicting the training set's most frequent class,
    scored on the eval split: the score at or below which a run has learnt nothing (the leaderboard
    marks it degenerate). Ties go to the lower class index. Metrics scored over a whole question
    rather than per row (MultiRC's f1a, exact match) have none here."""
    from lightning_modules.tasks.metrics import CLASSIFICATION_METRICS, compute_metrics

    counts = torch.bincount(torch.as_tensor(list(train_labels), dtype=torch.long), minlength=num_labels)
    gold = torch.as_tensor(list(eval_labels), dtype=torch.long)
    constant = torch.full_like(gold, int(counts.argmax()))
    scored = [n for n in names if n in CLASSIFICATION_METRICS]
    return compute_metrics(scored, constant, gold, num_labels=num_labels) if scored else {}


def classification_outcome(
    task, split_name: str, logits: torch.Tensor, labels: Sequence[int]
) -> tuple[dict, dict | None]:
    """A classification task's eval split as the summary stores it: the confusion report, and the
    majority-class baseline of its main metric (None where the metric has none). `task` is a
    LoadedTask; `logits` B×C in split order."""
    split = task.data.splits[split_name]
    report = confusion_report(logits, list(labels), task.spec.labels, [ex.texts for ex in split.examples])
    baseline = majority_baseline(
        task.spec.metrics, [ex.label for ex in task.train.examples], list(labels), task.spec.num_labels
    )
    if task.spec.main_metric not in baseline:
        return report, None
    return report, {"kind": "majority_class", "metric": task.spec.main_metric, "value": baseline[task.spec.main_metric]}
