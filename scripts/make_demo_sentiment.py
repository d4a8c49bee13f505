"""Writes data/demo/SENTIMENT/{train,dev}.tsv: a small generated sentiment task for `make demo`
(a TSV with a `label<TAB>text` header, read by task=demo/sentiment), so the demo needs neither the network nor the shared
data. Sentences are drawn from templates with a fixed seed; negation flips a predicate's
polarity, so a model has to read more than one word. Regenerate: python scripts/make_demo_sentiment.py
"""

from __future__ import annotations

import random
from pathlib import Path

SUBJECTS = ["the film", "this movie", "the plot", "the acting", "the soundtrack", "the ending", "the cast",
            "the director's new picture", "the script", "the second half", "the dialogue", "the photography"]
POSITIVE = ["wonderful", "moving", "funny", "clever", "gripping", "beautiful", "charming", "fresh", "brilliant",
            "delightful", "touching", "sharp"]
NEGATIVE = ["dull", "boring", "clumsy", "tedious", "predictable", "bland", "awful", "flat", "silly", "messy",
            "tiresome", "weak"]
VERBS = ["was", "is", "felt", "seemed", "turned out"]
INTENSIFIERS = ["", "", "really ", "quite ", "truly ", "rather "]
ENDINGS = [".", ".", " overall.", " from start to finish.", ", i thought.", " in the end."]


def sentence(rng: random.Random) -> tuple[int, str]:
    positive = rng.random() < 0.5
    negated = rng.random() < 0.3
    adjective = rng.choice(POSITIVE if positive != negated else NEGATIVE)
    verb = rng.choice(VERBS)
    neg = " not" if negated else ""
    text = f"{rng.choice(SUBJECTS)} {verb}{neg} {rng.choice(INTENSIFIERS)}{adjective}{rng.choice(ENDINGS)}"
    if rng.random() < 0.25:  # a second clause of the same polarity
        text = text[:-1] + f" and {rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(POSITIVE if positive else NEGATIVE)}."
    return int(positive), text


def main() -> None:
    rng = random.Random(2026)
    out = Path(__file__).resolve().parents[1] / "data" / "demo" / "SENTIMENT"
    out.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 600), ("dev", 200)):
        rows = [sentence(rng) for _ in range(n)]
        lines = ["label\ttext\n", *(f"{label}\t{text}\n" for label, text in rows)]
        (out / f"{split}.tsv").write_text("".join(lines), encoding="utf-8")


if __name__ == "__main__":
    main()
