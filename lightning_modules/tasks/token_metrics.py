"""Token-classification metrics, word level, from seqeval (the library NER papers and Hugging
Face's examples score with):

  entity_f1, entity_precision, entity_recall
      seqeval's default mode: conlleval's chunking (an `I-X` after `O` or after another type
      starts a new entity, as data/tagged.py's BIO repair writes it), micro-averaged over entities
  entity_f1_strict, entity_precision_strict, entity_recall_strict
      seqeval's strict mode with the IOB2 scheme: an entity counts only with a well-formed
      `B-X I-X*` span, so a model's orphan `I-` tags cost it here and not above
  token_accuracy
      the fraction of words whose tag is right (tagging tasks: UPOS, XPOS)

`TOKEN_METRIC_MODES` is what a summary says about the modes. Both sides are word tag lists; an
empty gold and prediction (no entities anywhere) scores 0, as seqeval says.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from seqeval.metrics import accuracy_score, f1_score, precision_score, recall_score
from seqeval.scheme import IOB2

from ptmlab.contracts import ConfigError

TOKEN_METRIC_MODES = {
    "entity_*": "seqeval default mode (conlleval-compatible chunking)",
    "entity_*_strict": "seqeval strict mode, IOB2 scheme",
    "token_accuracy": "word-level accuracy",
}
ENTITY_SCORES = {"f1": f1_score, "precision": precision_score, "recall": recall_score}


def token_metrics(names: Sequence[str], gold: list[list[str]], pred: list[list[str]]) -> dict[str, float]:
    if len(gold) != len(pred) or any(len(g) != len(p) for g, p in zip(gold, pred)):
        raise ValueError("gold and predicted tag sequences differ in shape")
    out: dict[str, float] = {}
    for name in names:
        if name == "token_accuracy":
            out[name] = float(accuracy_score(gold, pred))
            continue
        base, _, mode = name.removeprefix("entity_").partition("_")
        if not name.startswith("entity_") or base not in ENTITY_SCORES or mode not in ("", "strict"):
            raise ConfigError(f"unknown token-classification metric '{name}' (task.metrics)")
        kwargs = {"mode": "strict", "scheme": IOB2} if mode == "strict" else {}
        with warnings.catch_warnings():  # seqeval warns on 0/0 (no entities) and returns 0, which we keep
            warnings.simplefilter("ignore")
            out[name] = float(ENTITY_SCORES[base](gold, pred, zero_division=0, **kwargs))
    return out
