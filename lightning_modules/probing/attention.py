"""Attention analysis (Clark et al., 2019, "What does BERT look at?"), per layer × head:

- entropy of each query token's attention distribution (mean over tokens);
- share of attention to [CLS] (the first token), [SEP] (the last real token), punctuation, the
  previous token and the next token (mean over query tokens);
- dependency-arc accuracy per relation: at the word level (attention *to* a word = the sum over
  its subwords, *from* a word = the mean over its subwords), how often a dependent's most-attended
  other word is its gold head.

Hugging Face backbones return attention weights only with eager attention: probing switches it on
(`ensure_eager_attention`) for the backbones it loads, nowhere else.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from lightning_modules.data.conllu import ConlluSentence
from lightning_modules.probing.activations import FORWARD_PASSES, encode_words, pad_batch, tokenized_max_length

RELATIONS = (
    "det",
    "nsubj",
    "obj",
    "amod",
    "advmod",
    "case",
    "nmod",
    "aux",
    "compound",
    "mark",
    "conj",
    "cc",
    "obl",
    "poss",
)
TOKEN_STATISTICS = ("entropy", "cls", "sep", "punct", "prev", "next")


def ensure_eager_attention(backbone) -> None:
    """Hugging Face: eager attention (the SDPA/flash kernels return no weights)."""
    if not getattr(backbone, "hf_native", False):
        return
    model = backbone.model
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation("eager")
    else:  # older transformers
        model.config._attn_implementation = "eager"


def relation_of(deprel: str) -> str:
    return "poss" if deprel == "nmod:poss" else deprel.split(":")[0]


@torch.no_grad()
def run_attention_analysis(backbone, tokenizer, sentences: list[ConlluSentence], batch_size: int = 32) -> dict:
    backbone.eval()
    encoded = encode_words(tokenizer, [s.words for s in sentences], tokenized_max_length(backbone))
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    sums: dict[str, torch.Tensor] = {}
    counts: dict[str, torch.Tensor] = {}
    dep_correct: dict[str, torch.Tensor] = {}
    dep_total: dict[str, int] = {}

    def add(name: str, value: torch.Tensor, n: float | torch.Tensor = 1.0) -> None:
        sums[name] = sums.get(name, 0) + value
        counts[name] = counts.get(name, 0) + n

    for start in range(0, len(sentences), batch_size):
        batch = list(range(start, min(start + batch_size, len(sentences))))
        ids, mask = pad_batch([encoded[i] for i in batch], pad_id)
        out = backbone(ids, attention_mask=mask, output_attentions=True)
        FORWARD_PASSES["count"] += 1
        if out.attentions is None:
            raise RuntimeError(f"{type(backbone).__name__} returned no attentions with output_attentions=True")
        att = torch.stack(out.attentions).float()  # L × B × heads × T × T
        for b, i in enumerate(batch):
            s, positions = sentences[i], encoded[i]["positions"]
            n = int(mask[b].sum())
            a = att[:, b, :, :n, :n]  # L × heads × n × n
            entropy = -(a.clamp_min(1e-12).log() * a).sum(-1).mean(-1)  # L × heads
            add("entropy", entropy)
            add("cls", a[..., 0].mean(-1))
            add("sep", a[..., n - 1].mean(-1))
            punct_cols = [p for w, pos in enumerate(positions) if s.upos[w] == "PUNCT" for p in pos]
            add("punct", a[..., punct_cols].sum(-1).mean(-1) if punct_cols else torch.zeros(a.shape[:2]))
            idx = torch.arange(1, n)
            add("prev", a[..., idx, idx - 1].mean(-1))
            add("next", a[..., idx - 1, idx].mean(-1))
            # word level: to a word = sum over its subwords, from a word = mean over its subwords
            member = torch.zeros(len(positions), n)
            for w, pos in enumerate(positions):
                member[w, pos] = 1.0
            to_words = a @ member.T  # L × heads × n × W
            word_att = (member / member.sum(1, keepdim=True)) @ to_words  # L × heads × W × W
            word_att = word_att - torch.eye(len(positions)) * 1e9  # another word than itself
            predicted = word_att.argmax(-1)  # L × heads × W
            for w, head in enumerate(s.heads):
                if head <= 0:
                    continue
                rel = relation_of(s.deprels[w])
                hit = (predicted[..., w] == head - 1).float()
                for key in (rel, "all"):
                    dep_correct[key] = dep_correct.get(key, 0) + hit
                    dep_total[key] = dep_total.get(key, 0) + 1
    heatmaps = [{"statistic": name, "values": _grid(sums[name] / counts[name])} for name in TOKEN_STATISTICS]
    best_heads = {}
    for rel in [r for r in (*RELATIONS, "all") if r in dep_total]:
        accuracy = dep_correct[rel] / dep_total[rel]
        heatmaps.append({"statistic": f"dep:{rel}", "values": _grid(accuracy), "count": dep_total[rel]})
        flat = int(accuracy.argmax())
        layer, head = divmod(flat, accuracy.shape[1])
        best_heads[rel] = {
            "layer": layer + 1,
            "head": head,
            "accuracy": round(float(accuracy.max()), 5),
            "count": dep_total[rel],
        }
    return {
        "probe_task": "attention",
        "family": "attention",
        "metric": None,
        "eval_examples": len(sentences),
        "num_layers": int(att.shape[0]),
        "num_heads": int(att.shape[2]),
        "heatmaps": heatmaps,
        "best_heads": best_heads,
        "layers": [],
    }


def _grid(values: torch.Tensor) -> list[list[float]]:
    return [[round(float(v), 5) for v in row] for row in values]


def write_heatmaps(result: dict, folder: Path) -> list[Path]:
    """One PNG per statistic (layer × head) and all of them as heatmaps.json."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "heatmaps.json").write_text(json.dumps(result["heatmaps"]))
    written = []
    for item in result["heatmaps"]:
        fig, ax = plt.subplots(figsize=(4, 3))
        image = ax.imshow(item["values"], aspect="auto", cmap="viridis")
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_yticks(range(len(item["values"])), [str(i + 1) for i in range(len(item["values"]))])
        ax.set_title(item["statistic"])
        fig.colorbar(image)
        fig.tight_layout()
        path = folder / f"{item['statistic'].replace(':', '_')}.png"
        fig.savefig(path, dpi=80)
        plt.close(fig)
        written.append(path)
    return written
