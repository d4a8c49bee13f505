"""Structural probes (Hewitt & Manning, 2019): a linear map B (rank × H) such that squared
distances ||B(h_i − h_j)||² approximate tree distances (distance probe) or squared norms ||B h_i||²
approximate depth in the tree (depth probe).

Scores, as in the paper:
- distance: UUAS of the minimum spanning tree of the predicted distances against the gold
  undirected tree, punctuation excluded (both trees over the non-punctuation words); distance
  Spearman = per word, Spearman between predicted and gold distances to every other word,
  averaged within each sentence length, then over lengths 5–50;
- depth: root accuracy (the least deep non-punctuation word is the gold root) and norm Spearman
  (per sentence, averaged within each sentence length, then over lengths 5–50).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from lightning_modules.data.conllu import ConlluSentence
from lightning_modules.probing.activations import Activations
from lightning_modules.probing.fit import FitSettings, fit, length_buckets
from ptmlab.methods.probing import StructuralProbeParams

STRUCTURAL_TASKS = ("distance", "depth")
SPEARMAN_LENGTHS = (5, 50)


def tree_distances(heads: list[int]) -> np.ndarray:
    """n × n path lengths in the undirected tree (heads 1-based, 0 = root)."""
    n = len(heads)
    adjacency = [[] for _ in range(n)]
    for i, h in enumerate(heads):
        if h > 0:
            adjacency[i].append(h - 1)
            adjacency[h - 1].append(i)
    dist = np.full((n, n), -1, dtype=np.int32)
    for start in range(n):
        dist[start, start] = 0
        frontier = [start]
        while frontier:
            nxt = []
            for u in frontier:
                for v in adjacency[u]:
                    if dist[start, v] < 0:
                        dist[start, v] = dist[start, u] + 1
                        nxt.append(v)
            frontier = nxt
    return dist


@dataclass
class TreeData:
    lengths: list[int]
    distances: list[torch.Tensor]  # n × n gold tree distances
    depths: list[torch.Tensor]  # n gold depths
    punct: list[list[bool]]
    heads: list[list[int]]
    # sentence -> its gold distances' centred row ranks: every layer of every model is scored
    # against the same gold ranks, so each sentence's are computed once
    gold_row_ranks: dict[int, np.ndarray] = field(default_factory=dict)

    def centred_gold_ranks(self, i: int) -> np.ndarray:
        if i not in self.gold_row_ranks:
            self.gold_row_ranks[i] = _centred_row_ranks(self.distances[i].numpy())
        return self.gold_row_ranks[i]


def tree_data(sentences: list[ConlluSentence]) -> TreeData:
    return TreeData(
        [len(s) for s in sentences],
        [torch.from_numpy(tree_distances(s.heads)).float() for s in sentences],
        [torch.tensor(s.depths(), dtype=torch.float) for s in sentences],
        [s.is_punct for s in sentences],
        [list(s.heads) for s in sentences],
    )


class DistanceProbe(nn.Module):
    declaration = StructuralProbeParams

    def __init__(self, hidden_size: int, rank: int):
        super().__init__()
        self.proj = nn.Parameter(torch.empty(hidden_size, rank).uniform_(-0.05, 0.05))

    def forward(self, h: torch.Tensor) -> torch.Tensor:  # B × T × H -> B × T × T squared distances
        t = h @ self.proj  # B × T × rank
        norms = (t**2).sum(-1)  # B × T
        # ||t_i - t_j||² = |t_i|² + |t_j|² - 2 t_i·t_j: a B × T × T product instead of B × T × T × rank
        return (norms.unsqueeze(2) + norms.unsqueeze(1) - 2 * t @ t.transpose(1, 2)).clamp_min(0)


class DepthProbe(DistanceProbe):
    def forward(self, h: torch.Tensor) -> torch.Tensor:  # B × T × H -> B × T squared norms
        return ((h @ self.proj) ** 2).sum(-1)


def padded_layer(acts: Activations, layer: int, sentences: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """(B × T × H float states, B × T mask) of those sentences at one layer."""
    offsets, lengths = acts.offsets, acts.lengths
    longest = int(max(lengths[i] for i in sentences))
    out = torch.zeros(len(sentences), longest, acts.states.shape[-1])
    mask = torch.zeros(len(sentences), longest, dtype=torch.bool)
    for b, i in enumerate(sentences):
        n = int(lengths[i])
        out[b, :n] = acts.states[layer, offsets[i] : offsets[i] + n].float()
        mask[b, :n] = True
    return out, mask


def padded_targets(data: TreeData, sentences: list[int], kind: str, longest: int) -> torch.Tensor:
    if kind == "distance":
        out = torch.zeros(len(sentences), longest, longest)
        for b, i in enumerate(sentences):
            n = data.lengths[i]
            out[b, :n, :n] = data.distances[i]
    else:
        out = torch.zeros(len(sentences), longest)
        for b, i in enumerate(sentences):
            out[b, : data.lengths[i]] = data.depths[i]
    return out


def train_probe(
    kind: str, acts: Activations, data: TreeData, layer: int, rank: int, settings: FitSettings
) -> DistanceProbe:
    torch.manual_seed(settings.seed)
    probe = (DistanceProbe if kind == "distance" else DepthProbe)(acts.states.shape[-1], rank)
    # Batches of sentences of similar length, padded once for every epoch: (states, mask, gold).
    batches = []
    for bucket in length_buckets(data.lengths, settings.batch_size):
        idx = bucket.tolist()
        h, mask = padded_layer(acts, layer, idx)
        batches.append((h, mask, padded_targets(data, idx, kind, h.shape[1])))

    def loss(batch: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> torch.Tensor:
        h, mask, gold = batch
        pred = probe(h)
        n = mask.sum(1).float()
        if kind == "distance":
            pair = mask.unsqueeze(2) & mask.unsqueeze(1)
            per_sentence = ((pred - gold).abs() * pair).sum((1, 2)) / n**2  # L1, normalised by n²
        else:
            per_sentence = ((pred - gold).abs() * mask).sum(1) / n
        return per_sentence.mean()

    return fit(probe, len(data.lengths), loss, settings, buckets=batches)


def minimum_spanning_tree(dist: np.ndarray) -> set[tuple[int, int]]:
    """Prim's algorithm; undirected edges as (min, max) pairs."""
    n = len(dist)
    if n < 2:
        return set()
    in_tree = np.zeros(n, dtype=bool)
    in_tree[0] = True
    best = dist[0].astype(float).copy()
    parent = np.zeros(n, dtype=int)
    edges = set()
    for _ in range(n - 1):
        candidates = np.where(in_tree, np.inf, best)
        j = int(candidates.argmin())
        edges.add((min(j, int(parent[j])), max(j, int(parent[j]))))
        in_tree[j] = True
        closer = dist[j] < best
        best = np.where(closer, dist[j], best)
        parent = np.where(closer, j, parent)
    return edges


def _spearman(a: np.ndarray, b: np.ndarray) -> float | None:
    from scipy.stats import spearmanr

    if len(a) < 2 or np.all(a == a[0]) or np.all(b == b[0]):
        return None
    return float(spearmanr(a, b).correlation)


def _centred_row_ranks(dist: np.ndarray) -> np.ndarray:
    """n × (n−1): each word's ranks of its distances to every other word, minus their mean."""
    from scipy.stats import rankdata

    n = len(dist)
    off = ~np.eye(n, dtype=bool)
    ranks = rankdata(dist[off].reshape(n, n - 1), axis=1)
    ranks -= ranks.mean(1, keepdims=True)
    return ranks


def _row_spearmans(pred: np.ndarray, gold: np.ndarray, gold_ranks: np.ndarray | None = None) -> np.ndarray:
    """Per word (row), Spearman between its predicted and gold distances to every other word
    (`gold_ranks`: the gold's `_centred_row_ranks`, where already known)."""
    n = len(pred)
    if n < 3:
        return np.zeros(0)
    rp = _centred_row_ranks(pred)
    rg = _centred_row_ranks(gold) if gold_ranks is None else gold_ranks
    den = np.sqrt((rp**2).sum(1) * (rg**2).sum(1))
    valid = den > 0
    return (rp * rg).sum(1)[valid] / den[valid]


def _by_length_mean(per_length: dict[int, list[float]]) -> float | None:
    lo, hi = SPEARMAN_LENGTHS
    means = [float(np.mean(v)) for n, v in per_length.items() if lo <= n <= hi and v]
    return float(np.mean(means)) if means else None


@torch.no_grad()
def score_probe(kind: str, probe: DistanceProbe, acts: Activations, data: TreeData, layer: int) -> dict:
    per_length: dict[int, list[float]] = defaultdict(list)
    correct = total = roots_right = roots = 0
    for start in range(0, len(data.lengths), 64):
        idx = list(range(start, min(start + 64, len(data.lengths))))
        h, _ = padded_layer(acts, layer, idx)
        pred_batch = probe(h).numpy()
        for b, i in enumerate(idx):
            n = data.lengths[i]
            keep = [j for j in range(n) if not data.punct[i][j]]
            if kind == "distance":
                pred, gold = pred_batch[b, :n, :n], data.distances[i].numpy()
                if len(keep) >= 2:
                    sub = pred[np.ix_(keep, keep)]
                    predicted = {(keep[a], keep[c]) for a, c in minimum_spanning_tree(sub)}
                    gold_edges = {
                        (min(j, data.heads[i][j] - 1), max(j, data.heads[i][j] - 1))
                        for j in keep
                        if data.heads[i][j] > 0 and not data.punct[i][data.heads[i][j] - 1]
                    }
                    correct += len(predicted & gold_edges)
                    total += len(gold_edges)
                rows = _row_spearmans(pred, gold, data.centred_gold_ranks(i) if n >= 3 else None)
                if len(rows):
                    per_length[n].append(float(rows.mean()))
            else:
                pred, gold = pred_batch[b, :n], data.depths[i].numpy()
                if keep:
                    roots += 1
                    predicted_root = keep[int(np.argmin(pred[keep]))]
                    roots_right += int(data.heads[i][predicted_root] == 0)
                r = _spearman(pred, gold)
                if r is not None:
                    per_length[n].append(r)
    if kind == "distance":
        return {"uuas": round(correct / max(total, 1), 5), "spearman": _round(_by_length_mean(per_length))}
    return {"root_accuracy": round(roots_right / max(roots, 1), 5), "spearman": _round(_by_length_mean(per_length))}


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 5)


def run_structural_task(
    kind: str,
    train_acts: Activations,
    eval_acts: Activations,
    train: TreeData,
    eval_: TreeData,
    layers: list[int],
    rank: int,
    settings: FitSettings,
) -> dict:
    per_layer = []
    for layer in layers:
        probe = train_probe(kind, train_acts, train, layer, rank, settings)
        per_layer.append({"layer": layer, **score_probe(kind, probe, eval_acts, eval_, layer)})
    return {
        "probe_task": kind,
        "family": "structural",
        "metric": "uuas" if kind == "distance" else "root_accuracy",
        "probe": f"rank{rank}",
        "rank": rank,
        "train_examples": len(train.lengths),
        "eval_examples": len(eval_.lengths),
        "layers": per_layer,
    }
