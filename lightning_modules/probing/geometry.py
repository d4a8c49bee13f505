"""Representation geometry per layer (Ethayarajh 2019, "How contextual are contextualized word
representations?"), read from the same cached word-level activations as the trained probes, with
nothing trained:

- `anisotropy`: the mean cosine similarity of two words drawn uniformly at random from different
  sentences: how much of the space every representation shares (0 for an isotropic space);
- `self_similarity`: for each word type seen in at least `MIN_CONTEXTS` different sentences, the
  mean cosine similarity between its representations in those sentences, averaged over the types
  (1: the same vector in every context, as a static embedding);
- `intra_sentence_similarity`: the mean cosine similarity between each word of a sentence and the
  sentence's mean vector, averaged over sentences of two words or more.

Each is reported raw and, for the last two, less the layer's anisotropy (`..._adjusted`), which is
how Ethayarajh compares layers whose spaces are anisotropic to different degrees.
"""

from __future__ import annotations

from collections import defaultdict

import torch
import torch.nn.functional as F

from lightning_modules.probing.activations import Activations
from ptmlab.contracts import DataError

GEOMETRY_TASKS = ("anisotropy", "self_similarity", "intra_sentence_similarity")
MIN_CONTEXTS = 5  # Ethayarajh's threshold: a word type's self-similarity needs this many sentences
ANISOTROPY_PAIRS = 2000  # word pairs drawn from different sentences per layer
MAX_CONTEXTS = 50  # contexts per word type kept (the first ones): a frequent type costs no more


def anisotropy(states: torch.Tensor, sentence_of: torch.Tensor, pairs: int, generator: torch.Generator) -> float:
    """Mean cosine of `pairs` word pairs (N × H `states`) drawn uniformly from different sentences."""
    n = states.shape[0]
    first = torch.randint(n, (pairs,), generator=generator)
    second = torch.randint(n, (pairs,), generator=generator)
    apart = sentence_of[first] != sentence_of[second]
    if not bool(apart.any()):
        raise DataError("probe task anisotropy needs words from at least two sentences of the evaluation treebank")
    return float(F.cosine_similarity(states[first[apart]], states[second[apart]], dim=-1).mean())


def contexts_by_word(words: list[list[str]], min_contexts: int = MIN_CONTEXTS) -> dict[str, list[int]]:
    """{word type: flat word rows, one per sentence it occurs in (its first occurrence there)} for
    the types seen in at least `min_contexts` sentences, each with at most MAX_CONTEXTS rows."""
    rows: dict[str, list[int]] = defaultdict(list)
    row = 0
    for sentence in words:
        seen = set()
        for word in sentence:
            if word not in seen:
                seen.add(word)
                if len(rows[word]) < MAX_CONTEXTS:
                    rows[word].append(row)
            row += 1
    return {w: r for w, r in rows.items() if len(r) >= min_contexts}


def self_similarity(states: torch.Tensor, contexts: dict[str, list[int]]) -> float:
    """Mean over word types of the mean pairwise cosine between the type's representations."""
    scores = []
    for rows in contexts.values():
        unit = F.normalize(states[rows], dim=-1)  # n × H
        n = unit.shape[0]
        pairwise = unit @ unit.T  # n × n, 1 on the diagonal
        scores.append((pairwise.sum() - pairwise.diagonal().sum()) / (n * n - n))
    return float(torch.stack(scores).mean())


def intra_sentence_similarity(states: torch.Tensor, offsets: torch.Tensor) -> float:
    """Mean over sentences (two words or more) of the mean cosine of each word with the sentence's
    mean vector."""
    scores = []
    for start, end in zip(offsets[:-1].tolist(), offsets[1:].tolist()):
        if end - start < 2:
            continue
        sentence = states[start:end]  # n × H
        scores.append(F.cosine_similarity(sentence, sentence.mean(0, keepdim=True), dim=-1).mean())
    if not scores:
        raise DataError("probe task intra_sentence_similarity needs a sentence of two words or more")
    return float(torch.stack(scores).mean())


def check_treebank(tasks: list[str], words: list[list[str]], path: str) -> None:
    """DataError naming the file when the evaluation treebank cannot give a task a value (before
    any extraction)."""
    if "self_similarity" in tasks and not contexts_by_word(words):
        raise DataError(
            f"{path}: probe task self_similarity needs a word that occurs in {MIN_CONTEXTS} sentences; none does"
        )
    if set(tasks) & set(GEOMETRY_TASKS) and len(words) < 2:
        raise DataError(f"{path}: the geometry probes need two sentences or more")
    if "intra_sentence_similarity" in tasks and not any(len(w) >= 2 for w in words):
        raise DataError(f"{path}: probe task intra_sentence_similarity needs a sentence of two words or more")


def run_geometry_task(task: str, acts: Activations, words: list[list[str]], layers: list[int], seed: int) -> dict:
    """One geometry task on every probed layer of the evaluation treebank's activations."""
    sentence_of = torch.repeat_interleave(torch.arange(len(acts.lengths)), acts.lengths.long())
    contexts = contexts_by_word(words) if task == "self_similarity" else {}
    per_layer = []
    for layer in layers:
        states = acts.layer(layer)
        generator = torch.Generator().manual_seed(seed + layer)
        entry = {"layer": layer, "anisotropy": anisotropy(states, sentence_of, ANISOTROPY_PAIRS, generator)}
        if task == "self_similarity":
            entry[task] = self_similarity(states, contexts)
        elif task == "intra_sentence_similarity":
            entry[task] = intra_sentence_similarity(states, acts.offsets)
        if task != "anisotropy":
            entry[f"{task}_adjusted"] = entry[task] - entry["anisotropy"]
        per_layer.append(entry)
    result = {"probe_task": task, "family": "geometry", "metric": task, "layers": per_layer}
    if task == "self_similarity":
        result["word_types"] = len(contexts)
    return result
