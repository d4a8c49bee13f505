"""Sentence probes (Conneau et al., 2018), built from the treebank itself: a probe reads the mean
of a sentence's word states at one layer and predicts

- sentence_length: the number of words, in bins (Conneau's SentLen);
- tree_depth: the depth of the dependency tree (longest root-to-word path), clipped to 2..8;
- bigram_shift: whether two adjacent words were swapped (half the sentences, a random non-final
  position; the shifted sentences are extracted as a dataset of their own);
- tense: Tense of the root (or of its auxiliary) where UD features give one (Past/Pres);
- subject_number: Number of the root's nsubj where given (Sing/Plur).

Sentences without the label (no Tense, no nsubj with Number) are left out of that task. Each task
reports the majority-class baseline.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable

import torch

from lightning_modules.data.conllu import ConlluSentence
from lightning_modules.probing.activations import Activations
from lightning_modules.probing.fit import FitSettings, fit, one_thread
from lightning_modules.probing.token import TokenProbe, encode_labels

SENTENCE_TASKS = ("sentence_length", "tree_depth", "bigram_shift", "tense", "subject_number")
LENGTH_BINS = (4, 8, 12, 16, 20, 25, 30)  # upper bounds; longer sentences share the last bin
SHIFT_SEED = 1234


def length_bin(n: int) -> str:
    for upper in LENGTH_BINS:
        if n <= upper:
            return f"<={upper}"
    return f">{LENGTH_BINS[-1]}"


def tense_of(s: ConlluSentence) -> str | None:
    root = next((i for i, h in enumerate(s.heads) if h == 0), None)
    if root is None:
        return None
    if s.feats[root].get("Tense"):
        return s.feats[root]["Tense"]
    for i, h in enumerate(s.heads):  # "has gone", "was taken": the auxiliary carries the tense
        if h == root + 1 and s.deprels[i].startswith("aux") and s.feats[i].get("Tense"):
            return s.feats[i]["Tense"]
    return None


def subject_number_of(s: ConlluSentence) -> str | None:
    root = next((i for i, h in enumerate(s.heads) if h == 0), None)
    for i, h in enumerate(s.heads):
        if root is not None and h == root + 1 and s.deprels[i].split(":")[0] == "nsubj":
            return s.feats[i].get("Number")
    return None


def shifted(sentences: list[ConlluSentence], seed: int = SHIFT_SEED) -> tuple[list[list[str]], list[str]]:
    """Word lists with two adjacent words swapped in about half of them, and the labels."""
    rng = random.Random(seed)
    words_out, labels = [], []
    for s in sentences:
        words = list(s.words)
        if len(words) >= 4 and rng.random() < 0.5:
            i = rng.randrange(len(words) - 1)
            words[i], words[i + 1] = words[i + 1], words[i]
            labels.append("shifted")
        else:
            labels.append("original")
        words_out.append(words)
    return words_out, labels


def labels_for(task: str, sentences: list[ConlluSentence]) -> list[str | None]:
    if task == "sentence_length":
        return [length_bin(len(s)) for s in sentences]
    if task == "tree_depth":
        return [str(min(max(max(s.depths()), 2), 8)) for s in sentences]
    if task == "tense":
        return [t if t in ("Past", "Pres") else None for t in map(tense_of, sentences)]
    if task == "subject_number":
        return [n if n in ("Sing", "Plur") else None for n in map(subject_number_of, sentences)]
    raise KeyError(task)


def sentence_means(acts: Activations) -> torch.Tensor:
    """(L+1) × sentences × H: the mean of each sentence's word states."""
    sentence_of_word = torch.repeat_interleave(torch.arange(len(acts.lengths)), acts.lengths.long())
    sums = torch.zeros(acts.num_layers, len(acts.lengths), acts.states.shape[-1])
    for layer in range(acts.num_layers):  # one layer at a time: the float copy of all is large
        sums[layer].index_add_(0, sentence_of_word, acts.states[layer].float())
    return sums / acts.lengths.float().clamp(min=1)[None, :, None]


def _fit_layer(
    x_train: torch.Tensor,
    y_train: torch.Tensor,
    x_eval: torch.Tensor,
    y_eval: torch.Tensor,
    num_labels: int,
    probe_cfg,
    settings: FitSettings,
) -> float:
    from torch.nn import functional as F

    torch.manual_seed(settings.seed)
    probe = TokenProbe(
        x_train.shape[-1], num_labels, str(probe_cfg.kind), int(probe_cfg.hidden_size), float(probe_cfg.dropout)
    )
    fit(probe, len(y_train), lambda b: F.cross_entropy(probe(x_train[b]), y_train[b]), settings)
    with torch.no_grad():
        return float((probe(x_eval).argmax(-1) == y_eval).float().mean())


def run_sentence_task(
    task: str,
    train_sents: list[ConlluSentence],
    eval_sents: list[ConlluSentence],
    train_acts: Activations,
    eval_acts: Activations,
    layers: list[int],
    probe_cfg,
    settings: FitSettings,
    extract_shifted: Callable[[str, list[list[str]]], Activations],
) -> dict:
    if task == "bigram_shift":
        train_words, train_labels = shifted(train_sents)
        eval_words, eval_labels = shifted(eval_sents, SHIFT_SEED + 1)
        train_acts = extract_shifted(f"bigram_shift/train[:{len(train_words)}]", train_words)
        eval_acts = extract_shifted(f"bigram_shift/eval[:{len(eval_words)}]", eval_words)
    else:
        train_labels, eval_labels = labels_for(task, train_sents), labels_for(task, eval_sents)
    train_keep = [i for i, y in enumerate(train_labels) if y is not None]
    eval_keep = [i for i, y in enumerate(eval_labels) if y is not None]
    vocab = {y: i for i, y in enumerate(sorted({train_labels[i] for i in train_keep}))}
    y_train = encode_labels([train_labels[i] for i in train_keep], vocab)
    y_eval = encode_labels([eval_labels[i] for i in eval_keep], vocab)
    x_train_all, x_eval_all = sentence_means(train_acts), sentence_means(eval_acts)
    per_layer = []
    with one_thread():
        for layer in layers:
            acc = _fit_layer(
                x_train_all[layer, train_keep],
                y_train,
                x_eval_all[layer, eval_keep],
                y_eval,
                len(vocab),
                probe_cfg,
                settings,
            )
            per_layer.append({"layer": layer, "accuracy": round(acc, 5)})
    majority = Counter(train_labels[i] for i in train_keep).most_common(1)[0][0]
    majority_acc = sum(1 for i in eval_keep if eval_labels[i] == majority) / max(len(eval_keep), 1)
    return {
        "probe_task": task,
        "family": "sentence",
        "metric": "accuracy",
        "probe": str(probe_cfg.kind),
        "num_labels": len(vocab),
        "train_examples": len(train_keep),
        "eval_examples": len(eval_keep),
        "layers": per_layer,
        "baselines": {"majority": round(majority_acc, 5)},
    }
