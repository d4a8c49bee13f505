"""Sentence-order prediction (ALBERT, Lan et al. 2020): the same pair classifier as NSP, but the
negatives are the two consecutive segments swapped (`data.pair_negative=swap`), so topic cues
cannot solve it and the model must learn discourse coherence."""

from __future__ import annotations

from lightning_modules.objectives.nsp import NextSentencePredictionObjective
from ptmlab.methods.objectives import NoArgumentsParams


class SentenceOrderPredictionObjective(NextSentencePredictionObjective):
    declaration = NoArgumentsParams

    name = "sop"
    pair_negative = "swap"
