"""DeepWordBug (Gao et al. 2018): misspell the most important words, one character edit each.

Scoring (`scoring`): `combined` is the paper's Combined Score, the temporal head score plus the
temporal tail score of each word, with F the gold probability:

    THS(i) = F(w_1..w_i) − F(w_1..w_{i−1})        TTS(i) = F(w_i..w_n) − F(w_{i+1}..w_n)

(2n queries); `unk` is TextAttack's ranking (the drop in F when the word becomes <unk>, n queries).

Edits (one random position per edit kind, from the example's seeded generator, as TextAttack's
`random_one=True`): swap two neighbouring characters, substitute a character, delete a character,
insert a character. Every edit changes a word by one character, so `max_edit_distance` (the
paper's and TextAttack's 30) bounds the number of words changed.
"""

from __future__ import annotations

import random
import string

import torch

from lightning_modules.attacks.recipe import AttackRecipe
from lightning_modules.attacks.victim import Victim
from ptmlab.methods.attacks import DeepWordBugParams

LETTERS = string.ascii_lowercase


def swap_neighbours(word: str, rng: random.Random) -> str:
    if len(word) < 2:
        return word
    i = rng.randrange(len(word) - 1)
    return word[:i] + word[i + 1] + word[i] + word[i + 2 :]


def substitute(word: str, rng: random.Random) -> str:
    i = rng.randrange(len(word))
    return word[:i] + rng.choice([c for c in LETTERS if c != word[i].lower()]) + word[i + 1 :]


def delete(word: str, rng: random.Random) -> str:
    if len(word) < 2:
        return word
    i = rng.randrange(len(word))
    return word[:i] + word[i + 1 :]


def insert(word: str, rng: random.Random) -> str:
    i = rng.randrange(len(word) + 1)
    return word[:i] + rng.choice(LETTERS) + word[i:]


EDITS = (swap_neighbours, substitute, delete, insert)


class DeepWordBug(AttackRecipe):
    declaration = DeepWordBugParams
    params: DeepWordBugParams  # the validated declaration (AttackRecipe.__init__)

    name = "deepwordbug"

    def rank(self, victim: Victim, words, gold, p_gold, indices, rng) -> list[int]:
        if self.params.scoring == "unk":
            scores = self.leave_one_out(victim, words, gold, p_gold, indices, "<unk>")
        else:
            scores = self.combined_scores(victim, words, gold, indices)
        order = sorted(range(len(indices)), key=lambda k: (-float(scores[k]), indices[k]))
        ranked = [indices[k] for k in order]
        # one edit per word: the edit budget is a word budget
        return ranked if self.params.max_edit_distance is None else ranked[: int(self.params.max_edit_distance)]

    @staticmethod
    def combined_scores(victim: Victim, words: list[str], gold: int, indices: list[int]) -> torch.Tensor:
        n = len(words)
        # prefixes w_1..w_k and suffixes w_k..w_n for k = 1..n, plus the empty ones (F of "")
        heads = victim.probabilities([words[:k] for k in range(n + 1)])[:, gold]  # heads[k] = F(w_1..w_k)
        tails = victim.probabilities([words[k:] for k in range(n + 1)])[:, gold]  # tails[k] = F(w_{k+1}..w_n)
        return torch.stack([(heads[i + 1] - heads[i]) + (tails[i] - tails[i + 1]) for i in indices])

    def candidates(self, words, i, rng) -> list[str]:
        return [edit(words[i], rng) for edit in EDITS]
