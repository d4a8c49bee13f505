"""Token probes: UPOS, XPOS and the dependency relation of a word to its head (an edge probe on
the dependent–head pair), per layer and over a learned scalar mix of all layers; linear or MLP.

Every token probe comes with its control task (Hewitt & Liang, 2019): each word type gets a
label drawn from the task's empirical label distribution, a probe of the same capacity is
trained on those labels, and selectivity = task accuracy − control accuracy.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from lightning_modules.data.conllu import ConlluSentence
from lightning_modules.probing.activations import Activations
from lightning_modules.probing.fit import FitSettings, fit
from ptmlab.contracts import DataError
from ptmlab.methods.probing import TokenProbeParams

TOKEN_TASKS = ("upos", "xpos", "deprel")
ABSENT = "_"


@dataclass
class TokenData:
    labels: list[str]
    word_types: list[str]  # the dependent's form: what the control task keys on
    index: torch.Tensor  # N × parts: global word rows (1 part: the word; 2: dependent, head)


def token_data(task: str, sentences: list[ConlluSentence]) -> TokenData:
    labels, types, index = [], [], []
    offset = 0
    for s in sentences:
        for i, word in enumerate(s.words):
            if task == "deprel":
                if s.heads[i] < 0:
                    continue
                head = offset + (s.heads[i] - 1 if s.heads[i] > 0 else i)  # the root pairs with itself
                labels.append(s.deprels[i].split(":")[0])  # the universal relation (nmod:poss -> nmod)
                index.append((offset + i, head))
            else:
                labels.append(s.upos[i] if task == "upos" else s.xpos[i])
                index.append((offset + i,))
            types.append(word)
        offset += len(s)
    return TokenData(labels, types, torch.tensor(index, dtype=torch.long))


def check_labels(task: str, sentences: list[ConlluSentence], path: str) -> None:
    """A task whose labels the file does not have (XPOS `_`, no HEAD) is refused before extraction."""
    column = {"upos": "UPOS", "xpos": "XPOS", "deprel": "DEPREL"}[task]
    for s in sentences:
        values = s.upos if task == "upos" else s.xpos if task == "xpos" else s.deprels
        if any(v != ABSENT for v in values):
            return
    raise DataError(f"{path}: probe task {task!r} needs the {column} column, which is '_' on every word")


def control_labels(
    train_types: list[str], eval_types: list[str], train_labels: list[str], seed: int
) -> tuple[list[str], list[str]]:
    """Hewitt & Liang's control task: one label per word type, drawn from the empirical label
    distribution of the training split (types seen only in evaluation get one too)."""
    counts = Counter(train_labels)
    names, weights = list(counts), [counts[n] for n in counts]
    rng = random.Random(seed)
    assigned: dict[str, str] = {}
    for t in [*train_types, *eval_types]:
        if t not in assigned:
            assigned[t] = rng.choices(names, weights)[0]
    return [assigned[t] for t in train_types], [assigned[t] for t in eval_types]


class ScalarMix(nn.Module):
    """softmax-normalised layer weights and a scale (ELMo's scalar mix)."""

    def __init__(self, num_layers: int):
        super().__init__()
        self.weights = nn.Parameter(torch.zeros(num_layers))
        self.gamma = nn.Parameter(torch.ones(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (L+1) × B × D -> B × D
        return self.gamma * torch.einsum("l,lbd->bd", self.weights.softmax(0), x)


class TokenProbe(nn.Module):
    declaration = TokenProbeParams

    def __init__(
        self,
        in_dim: int,
        num_labels: int,
        kind: str = "linear",
        hidden_size: int = 256,
        dropout: float = 0.0,
        mix_layers: int | None = None,
    ):
        super().__init__()
        self.mix = ScalarMix(mix_layers) if mix_layers else None
        if kind == "linear":
            self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(in_dim, num_labels))
        else:
            self.classifier = nn.Sequential(
                nn.Linear(in_dim, hidden_size), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden_size, num_labels)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.mix is not None:
            x = self.mix(x)
        return self.classifier(x)


def features(acts: Activations, layer: int | None, index: torch.Tensor) -> torch.Tensor:
    """B × (parts·H) for one layer, or (L+1) × B × (parts·H) over all layers (layer None)."""
    states = acts.states[layer] if layer is not None else acts.states  # [...] × words × H
    # index_select, not states[..., index, :]: the same rows, gathered from fp16 about twice as fast
    # on CPU, and every minibatch of every probe fit gathers
    picked = states.index_select(-2, index.reshape(-1))  # [...] × (B·parts) × H
    return picked.unflatten(-2, tuple(index.shape)).flatten(-2).float()  # [...] × B × (parts·H)


def encode_labels(labels: list[str], vocab: dict[str, int]) -> torch.Tensor:
    # A label never seen in training gets an id no probe predicts: it counts as an error.
    return torch.tensor([vocab.get(label, len(vocab)) for label in labels], dtype=torch.long)


def fit_and_score(
    train_acts: Activations,
    eval_acts: Activations,
    train_index: torch.Tensor,
    eval_index: torch.Tensor,
    y_train: torch.Tensor,
    y_eval: torch.Tensor,
    num_labels: int,
    layer: int | None,
    probe_cfg,
    settings: FitSettings,
) -> tuple[float, TokenProbe]:
    torch.manual_seed(settings.seed)
    in_dim = train_acts.states.shape[-1] * train_index.shape[1]
    probe = TokenProbe(
        in_dim,
        num_labels,
        str(probe_cfg.kind),
        int(probe_cfg.hidden_size),
        float(probe_cfg.dropout),
        mix_layers=train_acts.num_layers if layer is None else None,
    )

    def loss(batch: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(probe(features(train_acts, layer, train_index[batch])), y_train[batch])

    fit(probe, len(y_train), loss, settings)
    correct = 0
    with torch.no_grad():
        for start in range(0, len(y_eval), 4096):
            x = features(eval_acts, layer, eval_index[start : start + 4096])
            correct += int((probe(x).argmax(-1) == y_eval[start : start + 4096]).sum())
    return correct / max(len(y_eval), 1), probe


def run_token_task(
    task: str,
    train_acts: Activations,
    eval_acts: Activations,
    train: TokenData,
    eval_: TokenData,
    layers: list[int],
    probe_cfg,
    settings: FitSettings,
    control: bool = True,
    scalar_mix: bool = True,
) -> dict:
    """Per layer (and the scalar mix): accuracy, control accuracy, selectivity."""
    vocab = {label: i for i, label in enumerate(sorted(set(train.labels)))}
    y_train, y_eval = encode_labels(train.labels, vocab), encode_labels(eval_.labels, vocab)
    if control:
        c_train, c_eval = control_labels(train.word_types, eval_.word_types, train.labels, settings.seed)
        yc_train, yc_eval = encode_labels(c_train, vocab), encode_labels(c_eval, vocab)

    def scores(layer: int | None) -> dict:
        acc, probe = fit_and_score(
            train_acts, eval_acts, train.index, eval_.index, y_train, y_eval, len(vocab), layer, probe_cfg, settings
        )
        entry = {"accuracy": round(acc, 5)}
        if layer is None:
            entry["weights"] = [round(float(w), 4) for w in probe.mix.weights.detach().softmax(0)]
        if control:
            c_acc, _ = fit_and_score(
                train_acts,
                eval_acts,
                train.index,
                eval_.index,
                yc_train,
                yc_eval,
                len(vocab),
                layer,
                probe_cfg,
                settings,
            )
            entry.update(control_accuracy=round(c_acc, 5), selectivity=round(acc - c_acc, 5))
        return entry

    per_layer = [{"layer": layer, **scores(layer)} for layer in layers]
    majority = Counter(train.labels).most_common(1)[0][0]
    result = {
        "probe_task": task,
        "family": "token",
        "metric": "accuracy",
        "probe": str(probe_cfg.kind),
        "num_labels": len(vocab),
        "train_examples": len(y_train),
        "eval_examples": len(y_eval),
        "layers": per_layer,
        "baselines": {
            "majority": round(sum(1 for label in eval_.labels if label == majority) / max(len(y_eval), 1), 5)
        },
    }
    if scalar_mix:
        result["scalar_mix"] = scores(None)
    return result
