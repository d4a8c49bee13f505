"""PWWS, probability weighted word saliency (Ren et al. 2019): WordNet synonym swaps, words in
the order of saliency × best swap.

    S(i)    = P(gold | x) − P(gold | x with w_i → <unk>)          the word's saliency
    Δp*(i)  = max over synonyms s of P(gold | x) − P(gold | x with w_i → s)
    score_i = softmax(S)_i · Δp*(i)

then the greedy search of recipe.py in that order (at each word the best synonym is chosen again
on the text as changed so far, as TextAttack's `pwws_ren_2019` does). The paper and TextAttack put
no limit on the words changed or the queries; stop words are never changed.
"""

from __future__ import annotations

import torch

from lightning_modules.attacks.recipe import UNK, AttackRecipe
from lightning_modules.attacks.victim import Victim
from lightning_modules.attacks.wordnet import load_wordnet
from ptmlab.methods.attacks import PWWSParams


def keep_case(original: str, replacement: str) -> str:
    return replacement.capitalize() if original[:1].isupper() else replacement


class PWWS(AttackRecipe):
    declaration = PWWSParams
    params: PWWSParams  # the validated declaration (AttackRecipe.__init__)

    name = "pwws"

    def prepare(self, victim: Victim) -> None:
        load_wordnet()  # a missing WordNet is a one-line error before any example

    def candidates(self, words, i, rng) -> list[str]:
        return [keep_case(words[i], s) for s in load_wordnet().synonyms(words[i])]

    def rank(self, victim: Victim, words, gold, p_gold, indices, rng) -> list[int]:
        saliency = self.leave_one_out(victim, words, gold, p_gold, indices, UNK)
        best_swap = torch.zeros(len(indices))
        for k, i in enumerate(indices):
            swaps = self.candidates(words, i, rng)
            if swaps:
                out = victim.probabilities([words[:i] + [s] + words[i + 1 :] for s in swaps])
                best_swap[k] = p_gold - out[:, gold].min()
        score = torch.softmax(saliency, dim=0) * best_swap
        return [indices[k] for k in sorted(range(len(indices)), key=lambda k: (-float(score[k]), indices[k]))]
