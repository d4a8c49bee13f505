"""The attack recipes' mechanics on hand-worked examples (no trained model: a rule stands in for
the classifier, so every query and every choice can be worked out by hand), and WordNet read from
apt's wordnet-base."""

from __future__ import annotations

import random

import pytest
import torch

from lightning_modules.attacks.deepwordbug import EDITS, DeepWordBug, delete, insert, substitute, swap_neighbours
from lightning_modules.attacks.pwws import PWWS
from lightning_modules.attacks.recipe import FAILED, SUCCEEDED
from lightning_modules.attacks.victim import Victim
from lightning_modules.attacks.wordnet import WORDNET_DIR, load_wordnet

needs_wordnet = pytest.mark.skipif(
    not (WORDNET_DIR / "index.noun").is_file(), reason="WordNet 3.0 missing: apt-get install -y wordnet-base"
)


class RuleVictim(Victim):
    """P(positive) = 0.2 + 0.3·[good] + 0.1·[film]; label 1 = positive. Every sentence is a query."""

    def __init__(self):
        super().__init__(loaded=None, task="sst2")

    def probabilities(self, sentences, *, count=True):
        if count:
            if self.max_queries is not None and self.queries + len(sentences) > self.max_queries:
                from lightning_modules.attacks.victim import QueryBudgetSpent

                raise QueryBudgetSpent
            self.queries += len(sentences)
        pos = torch.tensor([0.2 + 0.3 * ("good" in w) + 0.1 * ("film" in w) for w in sentences])
        return torch.stack([1 - pos, pos], dim=1)


class FixedRandom:
    """randrange → 1, choice → 'z' (or the first choice that is not a letter list): hand-workable edits."""

    def randrange(self, n):
        return min(1, n - 1)

    def choice(self, seq):
        return "z" if "z" in seq else seq[0]


def test_deepwordbug_edits_by_hand():
    rng = FixedRandom()
    assert swap_neighbours("movie", rng) == "mvoie"
    assert substitute("movie", rng) == "mzvie"
    assert delete("movie", rng) == "mvie"
    assert insert("movie", rng) == "mzovie"
    assert swap_neighbours("a", rng) == "a" and delete("a", rng) == "a"  # nothing to swap or leave
    # one character each: the Levenshtein distance that bounds the recipe's edit budget
    rng = random.Random(0)
    for edit in EDITS:
        out = edit("wonderful", rng)
        assert out != "wonderful" and abs(len(out) - len("wonderful")) <= 1


def test_deepwordbug_combined_score_by_hand():
    victim, words = RuleVictim(), ["a", "good", "film"]
    victim.start(("a good film",), None)
    # THS(good) = F(a good) − F(a) = 0.3, TTS(good) = F(good film) − F(film) = 0.3; film: 0.1 + 0.1
    scores = DeepWordBug.combined_scores(victim, words, 1, [1, 2])
    assert torch.allclose(scores, torch.tensor([0.6, 0.2]))
    assert victim.queries == 2 * (len(words) + 1)
    recipe = DeepWordBug()
    assert recipe.rank(victim, words, 1, 0.6, [1, 2], random.Random(0)) == [1, 2]


def test_deepwordbug_attack_by_hand():
    """'a good film' (P=0.6): 'a' is a stop word; 'good' ranks first, any misspelling of it drops
    P to 0.3 < 0.5: success after one word, 1 + 8 (ranking) + the distinct edits of good queries
    (an edit that gives the word back, swapping its two o's, is not queried)."""
    victim, recipe = RuleVictim(), DeepWordBug()
    probs = torch.tensor([0.4, 0.6])
    words, changed, after, status = recipe.attack(victim, ("a good film",), 1, probs, random.Random(0))
    assert status == SUCCEEDED and changed == [1] and words[0] == "a" and words[2] == "film"
    assert words[1] != "good" and float(after[1]) == pytest.approx(0.3)
    rng = random.Random(0)  # the ranking draws nothing: the edits see the generator from its start
    edits = {e for edit in EDITS if (e := edit("good", rng)) != "good"}
    assert victim.queries == 1 + 8 + len(edits)


def test_max_perturbed_ratio_and_queries_stop_the_search():
    probs = torch.tensor([0.4, 0.6])
    # 3 words × 0.25 → no word may change
    victim = RuleVictim()
    _, changed, _, status = DeepWordBug(max_perturbed_ratio=0.25).attack(
        victim, ("a good film",), 1, probs, random.Random(0)
    )
    assert status == FAILED and changed == [] and victim.queries == 1
    # a budget of 5 queries pays for the clean prediction and the 4 prefixes, not the 4 suffixes
    victim = RuleVictim()
    _, changed, _, status = DeepWordBug(max_queries=5).attack(victim, ("a good film",), 1, probs, random.Random(0))
    assert status == FAILED and changed == [] and victim.queries == 5


@needs_wordnet
def test_wordnet_synonyms_by_hand():
    wn = load_wordnet()
    # data.noun 06613686: movie film picture moving_picture moving-picture_show motion_picture motion-picture
    # pic flick ...; morphy takes "movies" to "movie"; multi-word lemmas are left out
    assert wn.synonyms("movies") == ["film", "picture", "pic", "flick"]
    assert wn.base_forms("movies", "n") == ["movie"] and wn.base_forms("ran", "v") == ["run"]  # verb.exc
    assert wn.parts_of_speech("film") == {"n", "v"}
    assert "well" not in wn.synonyms("good", "n") and "well" in wn.synonyms("good", "r")


@needs_wordnet
def test_pwws_attack_by_hand():
    """'a good film': saliency = [0.3 (good), 0.1 (film)]; good has synonyms that all give 0.3
    (Δp* = 0.3), film's give 0.5 (Δp* = 0.1) → good first; its best synonym (the first of those
    tied) flips the label. Queries: 1 + 2 (saliency) + |syn(good)| + |syn(film)| (Δp*) + |syn(good)|."""
    victim, recipe = RuleVictim(), PWWS()
    n_good, n_film = len(load_wordnet().synonyms("good")), len(load_wordnet().synonyms("film"))
    words, changed, after, status = recipe.attack(
        victim, ("a good film",), 1, torch.tensor([0.4, 0.6]), random.Random(0)
    )
    assert status == SUCCEEDED and changed == [1]
    assert words[1] == load_wordnet().synonyms("good")[0]
    assert victim.queries == 1 + 2 + n_good + n_film + n_good
