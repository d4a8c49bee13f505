"""`attack`: one declaration per recipe class in lightning_modules/attacks/. A sample of 0, a ratio
outside (0, 1] or a query budget below 1 fails at compose time (exit 2 / HTTP 422, nothing run);
what needs the source model (a regression head, an MLM reference that is not a masked LM) is
refused by the stage before any run opens."""

from __future__ import annotations

from typing import Literal

from ptmlab.methods.fields import Name, NonZeroProbability, PositiveInt, TargetNode


class AttackSampleParams(TargetNode):
    """What every recipe takes. The sample keys are the attack stage's (it draws and batches the
    examples); the rest build the recipe (lightning_modules/attacks/), whose settings are this
    declaration, as conf/attack/*.yaml is (written by `python -m ptmlab.declared_yaml`)."""

    name: Name
    num_examples: PositiveInt = 100  # a seeded sample of the split (seed=)
    split: Name | None = None  # null: the task's first dev split
    label: Name | int | None = None  # only examples of this gold class; null: all
    batch_size: PositiveInt = 64  # sentences per forward pass


class WordRecipeParams(AttackSampleParams):
    """The constraints of the greedy word-by-word search (lightning_modules/attacks/recipe.py)."""

    max_perturbed_ratio: NonZeroProbability | None = None  # null: no limit (neither the papers nor TextAttack set one)
    max_queries: PositiveInt | None = None  # per example; null: no limit
    stop_words: bool = True  # never edit a stop word


class DeepWordBugParams(WordRecipeParams):
    """DeepWordBug (Gao et al. 2018): one-character edits (swap, substitute, delete, insert) of the
    most important words. Defaults: the paper's/TextAttack's."""

    scoring: Literal["combined", "unk"] = "combined"  # combined: the paper's head + tail score; unk: TextAttack's
    max_edit_distance: PositiveInt | None = 30  # characters edited in all (one per word)


class PWWSParams(WordRecipeParams):
    """Probability weighted word saliency (Ren et al. 2019): WordNet synonym swaps in the order of
    word saliency × best swap; the word recipe's keys only."""


class BAEParams(WordRecipeParams):
    """BAE-R (Garg & Ramakrishnan 2020): a masked LM proposes replacements for the most important
    words. Defaults: the paper's/TextAttack's (its sentence-encoder similarity check needs a download
    and is not applied)."""

    mlm: Name  # a masked LM: a ptmlab pretrain run with an MLM objective | a HF *ForMaskedLM folder or name
    max_candidates: PositiveInt = 50  # the MLM's top K whole words per position
    pos_match: bool = True  # a proposal shares a WordNet part of speech with the word it replaces


class UniversalTriggersParams(AttackSampleParams):
    """Universal adversarial triggers (Wallace et al. 2019), searched on the sample (`label`: the
    authors attack one class at a time). Defaults: the authors' SST-2 script
    (github.com/Eric-Wallace/universal-triggers sst.py)."""

    trigger_length: PositiveInt = 3  # tokens in the trigger
    init_token: Name = "the"  # the trigger starts as trigger_length × this token
    position: Literal["prepend", "append"] = "prepend"
    num_candidates: PositiveInt = 40  # HotFlip candidates per trigger position
    beam_size: PositiveInt = 1  # beams kept over the positions (1: the authors' SST-2 setting)
    iterations: PositiveInt = 10  # gradient steps at most; the search also stops when no candidate raises the loss


_A = "lightning_modules.attacks."
ATTACKS = {
    _A + "deepwordbug.DeepWordBug": DeepWordBugParams,
    _A + "pwws.PWWS": PWWSParams,
    _A + "bae.BAE": BAEParams,
    _A + "triggers.UniversalTriggers": UniversalTriggersParams,
}
