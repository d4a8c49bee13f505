"""Writes data/demo/SENTIMENT/{train,dev}.tsv: the generated sentiment task of `make demo` (a TSV
with a `label<TAB>text` header, read by task=demo/sentiment), so the demo needs neither the network
nor the shared data. Regenerate: python scripts/make_demo_sentiment.py

Short movie reviews drawn from templates with a fixed seed, hard enough that a comparison shows
something: the label is the review's bottom line, which a model finds only by reading how clauses
combine, not by spotting one word:

- negation flips a clause ("not brilliant", "far from dull", "never boring");
- contrast: the clause after "but" decides, and the main clause beats an "although" clause;
- a clause joined by "and" or "while" is weighed against the other by strength ("superb" beats
  "a bit slow", "mildly charming" loses to "dreadful");
- comparatives ("less tedious than i feared", "not as clever as the first one", "could have
  been funnier"), expectations ("i expected to love it, but i did not") and a closing verdict
  ("..., but overall a waste of two hours") that overrides what came before;
- a third of the adjectives appear only in dev: their polarity is known to a model pre-trained on
  real text, not to one that learnt its words from this training set.

Honest label noise: 8 % of the training labels are flipped at random, as annotators disagree on
real reviews; the dev labels are the rules' labels, unflipped. A model that fits the flipped
labels loses on dev; a distilled student gets the teacher's softer view of those examples.
"""

from __future__ import annotations

import random
from pathlib import Path

TRAIN_SIZE, DEV_SIZE = 600, 400
TRAIN_LABEL_NOISE = 0.08
SEED = 2026

ASPECTS = [
    "the film",
    "the plot",
    "the acting",
    "the soundtrack",
    "the ending",
    "the cast",
    "the script",
    "the second half",
    "the dialogue",
    "the photography",
    "the pacing",
    "the lead",
    "the humour",
    "the story",
    "the villain",
    "the effects",
    "the direction",
    "the first hour",
    "the score",
    "the characters",
]
# (word, polarity, strength): strength 2 outweighs strength 1 when clauses are weighed against each other
ADJECTIVES_SHARED = [
    ("brilliant", 1, 2),
    ("wonderful", 1, 2),
    ("superb", 1, 2),
    ("gripping", 1, 2),
    ("beautiful", 1, 2),
    ("moving", 1, 2),
    ("hilarious", 1, 2),
    ("fantastic", 1, 2),
    ("decent", 1, 1),
    ("pleasant", 1, 1),
    ("solid", 1, 1),
    ("charming", 1, 1),
    ("clever", 1, 1),
    ("fresh", 1, 1),
    ("likeable", 1, 1),
    ("watchable", 1, 1),
    ("awful", -1, 2),
    ("dreadful", -1, 2),
    ("terrible", -1, 2),
    ("unbearable", -1, 2),
    ("painful", -1, 2),
    ("boring", -1, 2),
    ("ridiculous", -1, 2),
    ("lifeless", -1, 2),
    ("dull", -1, 1),
    ("slow", -1, 1),
    ("bland", -1, 1),
    ("predictable", -1, 1),
    ("clumsy", -1, 1),
    ("forgettable", -1, 1),
    ("uneven", -1, 1),
    ("flat", -1, 1),
]
ADJECTIVES_DEV_ONLY = [
    ("magnificent", 1, 2),
    ("stunning", 1, 2),
    ("terrific", 1, 2),
    ("exhilarating", 1, 2),
    ("enjoyable", 1, 1),
    ("engaging", 1, 1),
    ("witty", 1, 1),
    ("lovely", 1, 1),
    ("horrible", -1, 2),
    ("atrocious", -1, 2),
    ("abysmal", -1, 2),
    ("excruciating", -1, 2),
    ("tedious", -1, 1),
    ("mediocre", -1, 1),
    ("shallow", -1, 1),
    ("sloppy", -1, 1),
]
VERBS = ["was", "is", "felt", "seemed", "turned out"]
STRONG_INTENSIFIERS = ["really ", "truly ", "utterly ", "absolutely "]
MILD_INTENSIFIERS = ["a bit ", "slightly ", "somewhat ", "mildly "]
NEGATORS = ["not ", "never ", "hardly ", "far from ", "anything but "]
REFERENCES = ["the first one", "the book", "the trailer", "i feared", "i hoped", "last year's hit", "the original"]
VERDICTS = [
    ("i would recommend it", 1),
    ("worth the ticket", 1),
    ("i left happy", 1),
    ("a must see", 1),
    ("i would happily see it again", 1),
    ("i would not recommend it", -1),
    ("not worth the ticket", -1),
    ("a waste of two hours", -1),
    ("i wanted my money back", -1),
    ("skip it", -1),
]
ENDINGS = [".", ".", ".", " overall.", ", i thought.", " in the end."]


class Review:
    """Draws one review and its label from one vocabulary of adjectives."""

    def __init__(self, rng: random.Random, adjectives: list[tuple[str, int, int]]):
        self.rng, self.adjectives = rng, adjectives

    def adjective(self, polarity: int | None = None, strength: int | None = None) -> tuple[str, int, int]:
        pool = [
            a
            for a in self.adjectives
            if (polarity is None or a[1] == polarity) and (strength is None or a[2] == strength)
        ]
        return self.rng.choice(pool)

    def clause(self, polarity: int, strength: int | None = None, negatable: bool = True) -> tuple[str, int, int]:
        """'the plot was a bit slow': (text, polarity, strength). A negated clause ('not brilliant')
        is mild whatever its adjective: a denial is weaker than an assertion."""
        rng = self.rng
        negated = negatable and strength != 2 and rng.random() < 0.3
        word, _, word_strength = self.adjective(-polarity if negated else polarity, None if negated else strength)
        if negated:
            modifier, strength = rng.choice(NEGATORS), 1
        elif word_strength == 2 and rng.random() < 0.4:
            modifier, strength = rng.choice(STRONG_INTENSIFIERS), 2
        elif word_strength == 1 and rng.random() < 0.4:
            modifier, strength = rng.choice(MILD_INTENSIFIERS), 1
        else:
            modifier, strength = "", word_strength
        return f"{self.subject()} {modifier}{word}", polarity, strength

    def subject(self) -> str:
        """'the plot was', 'the effects were'."""
        aspect = self.rng.choice(ASPECTS)
        verb = self.rng.choice(VERBS)
        if aspect.endswith("s"):
            verb = {"was": "were", "is": "are"}.get(verb, verb)
        return f"{aspect} {verb}"

    def simple(self, label: int) -> str:
        return self.clause(label)[0] + self.rng.choice(ENDINGS)

    def weighed(self, label: int) -> str:
        """Two clauses of opposite polarity: the stronger wins."""
        strong, _, _ = self.clause(label, strength=2)
        weak, _, _ = self.clause(-label, strength=1, negatable=False)
        first, second = (strong, weak) if self.rng.random() < 0.5 else (weak, strong)
        joiner = self.rng.choice([" and ", ", while ", ", and "])
        return f"{first}{joiner}{second}."

    def contrast(self, label: int) -> str:
        """The clause after 'but' decides; so does the main clause against an 'although' clause."""
        rng = self.rng
        decisive, _, _ = self.clause(label)
        other, _, _ = self.clause(-label)
        form = rng.randrange(3)
        if form == 0:
            return f"{other}, but {decisive}."
        if form == 1:
            return f"although {other}, {decisive}."
        return f"{decisive}, although {other}."

    def comparative(self, label: int) -> str:
        rng = self.rng
        reference = rng.choice(REFERENCES)
        form = rng.randrange(4)
        if form == 0:  # more/less + adjective: the sign is their product
            more = rng.random() < 0.5
            word, _, _ = self.adjective(label if more else -label)
            return f"{self.subject()} {'more' if more else 'less'} {word} than {reference}."
        if form == 1:
            word = rng.choice(["better", "funnier", "smarter"] if label > 0 else ["worse", "duller", "sillier"])
            return f"it {rng.choice(['was', 'is', 'turned out'])} {rng.choice(['', 'even ', 'much '])}{word} than {reference}."
        if form == 2:
            if label > 0:
                return f"it could not have been {rng.choice(['better', 'funnier', 'more moving'])}."
            return f"it could have been {rng.choice(['better', 'funnier', 'shorter', 'a lot better'])}."
        word, _, _ = self.adjective(1)
        reference = rng.choice([r for r in REFERENCES if not r.startswith("i ")])
        if label > 0:
            return f"{self.subject()} as {word} as {reference}, if not more."
        return f"{self.subject()} not as {word} as {reference}."

    def expectation(self, label: int) -> str:
        rng = self.rng
        expected = rng.choice([1, -1])
        verb = {1: rng.choice(["love", "like", "enjoy"]), -1: rng.choice(["hate", "dislike", "be bored by"])}[expected]
        if expected == label:
            return f"i expected to {verb} it, and i {rng.choice(['did', 'really did'])}."
        return f"i expected to {verb} it, but i {rng.choice(['did not', 'never did', 'was wrong'])}."

    def verdict(self, label: int) -> str:
        rng = self.rng
        text, _ = rng.choice([v for v in VERDICTS if v[1] == label])
        before, _, _ = self.clause(rng.choice([1, -1]))
        joiner = rng.choice([", but overall ", ". still, ", ", so ", ". in the end, "])
        return f"{before}{joiner}{text}."

    def draw(self) -> tuple[int, str]:
        label = self.rng.choice([1, -1])
        template = self.rng.choices(
            [self.simple, self.weighed, self.contrast, self.comparative, self.expectation, self.verdict],
            weights=[3, 3, 4, 3, 1, 2],
        )[0]
        return int(label > 0), template(label)


def draw_split(rng: random.Random, size: int, adjectives: list, noise: float) -> list[tuple[int, str]]:
    review, seen, rows = Review(rng, adjectives), set(), []
    while len(rows) < size:
        label, text = review.draw()
        if text in seen:
            continue
        seen.add(text)
        rows.append((1 - label if rng.random() < noise else label, text))
    return rows


def main() -> None:
    rng = random.Random(SEED)
    out = Path(__file__).resolve().parents[1] / "data" / "demo" / "SENTIMENT"
    out.mkdir(parents=True, exist_ok=True)
    train = draw_split(rng, TRAIN_SIZE, ADJECTIVES_SHARED, TRAIN_LABEL_NOISE)
    train_texts = {text for _, text in train}
    dev = [
        row
        for row in draw_split(rng, DEV_SIZE * 2, ADJECTIVES_SHARED + ADJECTIVES_DEV_ONLY, 0.0)
        if row[1] not in train_texts
    ][:DEV_SIZE]
    for split, rows in (("train", train), ("dev", dev)):
        lines = ["label\ttext\n", *(f"{label}\t{text}\n" for label, text in rows)]
        (out / f"{split}.tsv").write_text("".join(lines), encoding="utf-8")


if __name__ == "__main__":
    main()
