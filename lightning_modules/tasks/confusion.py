"""What a classification fine-tune got wrong, stored with its run (`predictions/confusion.json` and
the summary's `confusion`): the confusion matrix (rows gold, columns predicted), each class's
precision, recall, F1 and support (scikit-learn), and the eval examples it was most confident
about and wrong."""

from __future__ import annotations

from collections.abc import Sequence

import torch

CONFUSION_FILE = "confusion.json"  # under the run's predictions/
MISCLASSIFIED_SHOWN = 20


def confusion_report(logits: torch.Tensor, labels: Sequence[int], label_names: Sequence[str],
                     texts: Sequence[Sequence[str]]) -> dict:
    """`logits` B×C of the eval split in split order, `labels` its gold class indices, `texts` each
    example's input texts (one or a pair)."""
    from sklearn.metrics import confusion_matrix, precision_recall_fscore_support

    probabilities = torch.softmax(logits.to(torch.float64), dim=-1)
    confidence, predicted = probabilities.max(dim=-1)
    gold = torch.as_tensor(list(labels), dtype=torch.long)
    classes = list(range(len(label_names)))
    matrix = confusion_matrix(gold.numpy(), predicted.numpy(), labels=classes)
    precision, recall, f1, support = precision_recall_fscore_support(
        gold.numpy(), predicted.numpy(), labels=classes, zero_division=0)
    wrong = (predicted != gold).nonzero().flatten().tolist()
    wrong.sort(key=lambda i: -float(confidence[i]))  # the most confident mistakes first
    return {
        "labels": [str(name) for name in label_names],
        "matrix": matrix.tolist(),
        "per_class": [{"label": str(name), "precision": float(precision[c]), "recall": float(recall[c]),
                       "f1": float(f1[c]), "support": int(support[c])} for c, name in enumerate(label_names)],
        "misclassified": [{"index": i, "text": " ||| ".join(str(t) for t in texts[i]),
                           "gold": str(label_names[int(gold[i])]), "predicted": str(label_names[int(predicted[i])]),
                           "score": round(float(confidence[i]), 4)} for i in wrong[:MISCLASSIFIED_SHOWN]],
        "errors": len(wrong), "examples": int(gold.numel()),
    }


def majority_baseline(names: Sequence[str], labels: Sequence[int], num_labels: int) -> dict[str, float]:
    """Each classification metric of always predicting the eval split's most frequent class: the
    score at or below which a run has learnt nothing (the leaderboard marks it degenerate)."""
    from lightning_modules.tasks.metrics import compute_metrics

    gold = torch.as_tensor(list(labels), dtype=torch.long)
    majority = int(torch.bincount(gold, minlength=num_labels).argmax())
    constant = torch.full_like(gold, majority)
    scored = [n for n in names if n not in ("pearson", "spearmanr", "mse", "mae")]
    return compute_metrics(scored, constant, gold, num_labels=num_labels) if scored else {}
