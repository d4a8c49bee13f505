"""`attack`: one declaration per recipe class in lightning_modules/attacks/. A sample of 0, a ratio
outside (0, 1] or a query budget below 1 fails at compose time (exit 2 / HTTP 422, nothing run);
what needs the source model (a regression head, an MLM reference that is not a masked LM) is
refused by the stage before any run opens."""

from __future__ import annotations

from typing import Literal

from ptmlab.methods.fields import Name, NonZeroProbability, PositiveInt, TargetNode


class AttackSampleParams(TargetNode):
    name: Name
    num_examples: PositiveInt = 100  # a seeded sample of the split
    split: Name | None = None  # null: the task's first dev split
    label: Name | int | None = None  # only examples of this gold class; null: all
    batch_size: PositiveInt = 64


class WordRecipeParams(AttackSampleParams):
    max_perturbed_ratio: NonZeroProbability | None = None  # null: no limit
    max_queries: PositiveInt | None = None
    stop_words: bool = True


class DeepWordBugParams(WordRecipeParams):
    scoring: Literal["combined", "unk"] = "combined"
    max_edit_distance: PositiveInt | None = 30


class PWWSParams(WordRecipeParams):
    """Probability weighted word saliency: the word recipe's keys only."""


class BAEParams(WordRecipeParams):
    mlm: Name  # a masked LM: HF *ForMaskedLM folder or a ptmlab pretrain run/export
    max_candidates: PositiveInt = 50
    pos_match: bool = True


class UniversalTriggersParams(AttackSampleParams):
    trigger_length: PositiveInt = 3
    init_token: Name = "the"
    position: Literal["prepend", "append"] = "prepend"
    num_candidates: PositiveInt = 40
    beam_size: PositiveInt = 1
    iterations: PositiveInt = 10


_A = "lightning_modules.attacks."
ATTACKS = {
    _A + "deepwordbug.DeepWordBug": DeepWordBugParams,
    _A + "pwws.PWWS": PWWSParams,
    _A + "bae.BAE": BAEParams,
    _A + "triggers.UniversalTriggers": UniversalTriggersParams,
}
