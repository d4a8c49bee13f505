"""What every attack recipe shares: the constraints (config keys, the recipe's published
defaults in conf/attack/<name>.yaml), the per-example record, and the greedy word-by-word search
the word- and character-level recipes in the literature use (TextAttack's `GreedyWordSwapWIR`):

    rank the modifiable words by importance (each recipe's own scoring) → in that order, try
    every candidate the recipe proposes for the word, keep the one that lowers the gold label's
    probability most → stop when the prediction flips (success), when the next change would
    exceed `max_perturbed_ratio`, or when the example's `max_queries` are spent (failure).

A recipe is a subclass that says which words are important (`rank`) and what a word may become
(`candidates`); `conf/attack/<name>.yaml` names it by `_target_`. A universal recipe (triggers.py)
instead searches once over the whole sample (`search`) before any example is attacked, overrides
`attack`, and says what it found (`report`, into the summary).
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from lightning_modules.attacks.stopwords import STOPWORDS
from lightning_modules.attacks.victim import QueryBudgetSpent, Victim
from ptmlab.contracts import ATTACK_RECORDS_FILE
from ptmlab.methods.attacks import AttackSampleParams
from ptmlab.methods.validation import declared_in_code

SUCCEEDED, FAILED, SKIPPED = "succeeded", "failed", "skipped"  # skipped: misclassified before any attack
UNK = "<unk>"  # what a word becomes when its importance is measured by removing its meaning
RECORDS_FILE = ATTACK_RECORDS_FILE  # an attack run's records, under its run folder (the dashboard reads them)


@dataclass
class AttackRecord:
    """One attacked example, as saved in <run>/attack/records.jsonl."""

    index: int  # row in the task's split
    id: str
    original: str  # the attacked text (for a pair: the second one)
    context: str | None  # the other text of a pair, held fixed
    label: int  # gold class index
    prediction_before: int
    status: str  # succeeded | failed | skipped
    perturbed: str | None = None
    prediction_after: int | None = None
    queries: int = 0
    words: int = 0
    changed_indices: list[int] = field(default_factory=list)  # in the perturbed text
    inserted: int = 0  # words the attack added (a trigger); 0 for substitutions

    @property
    def perturbed_ratio(self) -> float:
        """Changed words over the words of the perturbed text (the original's, for substitutions)."""
        total = self.words + self.inserted
        return len(self.changed_indices) / total if total else 0.0

    def to_dict(self) -> dict:
        return asdict(self)


class AttackRecipe:
    """Base of every recipe: the shared constraints and the greedy search. Its settings are its
    validated declaration (`params`, a `ptmlab.methods.attacks` model: the one statement of each
    key, its default and bounds)."""

    name = "attack"
    declaration: type[AttackSampleParams]  # each recipe names its own (`declaration = PWWSParams`)
    params: AttackSampleParams

    def __init__(self, params: AttackSampleParams | None = None, **values: Any):
        """`params`: the validated declaration (the attack stage's node, sample keys included); in
        code, its values as keywords (`DeepWordBug(max_queries=5)`), validated by the same
        declaration: one ConfigError line naming the key on a bad one."""
        self.params = params if params is not None else declared_in_code(self, values, "attack")
        self.name = self.params.name  # the option's name, as the summary's `recipe`

    def settings(self) -> dict:
        """The constraints as run (the summary's `constraints`): the recipe's declared keys but the
        stage's sample keys."""
        return self.params.model_dump(exclude={"name", "target", *AttackSampleParams.model_fields})

    def prepare(self, victim: Victim) -> None:
        """Load what the recipe needs beyond the victim (a masked LM); raise ConfigError on bad input."""

    def search(self, victim: Victim, examples: list[tuple[tuple[str, ...], int]]) -> None:
        """A universal recipe's search over the sample's correctly classified (texts, gold) before
        any is attacked; per-example recipes search nothing."""

    def report(self) -> dict:
        """What the search found, for the summary (a universal trigger); {} for per-example recipes."""
        return {}

    # -- what a recipe defines -----------------------------------------------------------------

    def rank(
        self, victim: Victim, words: list[str], gold: int, p_gold: float, indices: list[int], rng: random.Random
    ) -> list[int]:
        raise NotImplementedError

    def candidates(self, words: list[str], i: int, rng: random.Random) -> list[str]:
        raise NotImplementedError

    # -- shared ----------------------------------------------------------------------------------

    def modifiable(self, word: str) -> bool:
        return any(c.isalpha() for c in word) and not (self.params.stop_words and word.lower() in STOPWORDS)

    def leave_one_out(
        self, victim: Victim, words: list[str], gold: int, p_gold: float, indices: list[int], replacement: str | None
    ) -> torch.Tensor:
        """Drop in the gold probability when word i becomes `replacement` (None: deleted), per index."""
        sentences = [words[:i] + ([] if replacement is None else [replacement]) + words[i + 1 :] for i in indices]
        return p_gold - victim.probabilities(sentences)[:, gold]

    def attack(
        self, victim: Victim, texts: tuple[str, ...], gold: int, probs: torch.Tensor, rng: random.Random
    ) -> tuple[list[str], list[int], torch.Tensor | None, str]:
        """(perturbed words, changed indices, their probabilities, status) for a correctly classified
        example. Reads a word recipe's constraints (WordRecipeParams); a universal recipe overrides it."""
        words = victim.start(texts, self.params.max_queries)
        victim.queries = 1  # the clean prediction (`probs`), as TextAttack counts it
        allowed = (
            len(words)
            if self.params.max_perturbed_ratio is None
            else math.floor(self.params.max_perturbed_ratio * len(words))
        )
        indices = [i for i, w in enumerate(words) if self.modifiable(w)]
        current, changed, p_gold, last = list(words), [], float(probs[gold]), None
        try:
            order = self.rank(victim, words, gold, p_gold, indices, rng) if indices and allowed else []
            for i in order:
                if len(changed) >= allowed:
                    break
                proposals = [c for c in dict.fromkeys(self.candidates(current, i, rng)) if c and c != current[i]]
                if not proposals:
                    continue
                sentences = [current[:i] + [c] + current[i + 1 :] for c in proposals]
                out = victim.probabilities(sentences)
                best = int(torch.argmin(out[:, gold]))
                if float(out[best, gold]) >= p_gold:
                    continue  # no candidate helps: leave the word as it is
                current, p_gold, last = sentences[best], float(out[best, gold]), out[best]
                changed.append(i)
                if int(torch.argmax(last)) != gold:
                    return current, sorted(changed), last, SUCCEEDED
        except QueryBudgetSpent:
            pass
        return current, sorted(changed), last, FAILED
