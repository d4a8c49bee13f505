"""`objective`: one declaration per objective class (lightning_modules/objectives/, constructor
arguments other than the backbone and tokenizer the stage passes)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import model_validator

from ptmlab.methods.fields import (
    NODE,
    Fraction,
    NonNegativeFloat,
    NonNegativeInt,
    NonZeroProbability,
    PositiveFloat,
    PositiveInt,
    Probability,
    TargetNode,
    in_range,
)


class SeededObjectiveParams(TargetNode):
    seed: NonNegativeInt | None = None  # null: the run seed


class NoArgumentsParams(TargetNode):
    """Objectives whose only arguments are the backbone and tokenizer."""


class MaskedLMParams(SeededObjectiveParams):
    mask_prob: NonZeroProbability = 0.15  # 0 masks nothing: no loss
    mask_token_prob: Probability = 0.8
    random_token_prob: Probability = 0.1

    @model_validator(mode="after")
    def _replacements(self):
        if self.mask_token_prob + self.random_token_prob > 1.0 + 1e-9:
            raise ValueError(
                f"{NODE}.mask_token_prob={self.mask_token_prob} + {NODE}.random_token_prob="
                f"{self.random_token_prob} exceeds 1"
            )
        return self


class SpanMaskedLMParams(MaskedLMParams):
    geometric_p: NonZeroProbability = 0.2
    max_span_length: PositiveInt = 10
    whole_words: bool = True
    span_boundary_objective: bool = True
    sbo_weight: NonNegativeFloat = 1.0


class TranslationLMParams(MaskedLMParams):
    reset_positions: bool = True


class UnifiedLMParams(MaskedLMParams):
    mode_weights: (
        dict[Literal["bidirectional", "seq2seq", "left_to_right", "right_to_left"], NonNegativeFloat] | None
    ) = None

    @model_validator(mode="after")
    def _some_mode(self):
        if self.mode_weights is not None and sum(self.mode_weights.values()) <= 0:
            raise ValueError(f"{NODE}.mode_weights must give a positive weight to at least one mode")
        return self


class ReplacedTokenDetectionParams(SeededObjectiveParams):
    mask_prob: NonZeroProbability = 0.15
    mask_token_prob: Probability = 0.85
    rtd_weight: NonNegativeFloat = 50.0
    sampling_temperature: PositiveFloat = 1.0


class ContrastiveSentenceParams(TargetNode):
    temperature: PositiveFloat = 0.05
    pooling: Literal["mean", "cls"] = "mean"
    projection: bool = True


class SpanContrastiveParams(SeededObjectiveParams):
    max_ngram: PositiveInt = 5
    temperature: PositiveFloat = 0.1
    projection_size: PositiveInt = 128
    global_pooling: Literal["mean", "cls"] = "mean"


class DenoisingAutoencoderParams(SeededObjectiveParams):
    token_masking: Probability = 0.0
    token_deletion: Probability = 0.0
    text_infilling: Probability = 0.3
    poisson_lambda: NonNegativeFloat = 3.0
    sentence_permutation: bool = True
    document_rotation: bool = False

    @model_validator(mode="after")
    def _some_noise(self):
        if not (
            self.token_masking
            or self.token_deletion
            or self.text_infilling
            or self.sentence_permutation
            or self.document_rotation
        ):
            raise ValueError(
                f"{NODE}: every noising function is off; set one of token_masking, token_deletion, "
                f"text_infilling (rates > 0), sentence_permutation or document_rotation (true)"
            )
        return self


class MassParams(SeededObjectiveParams):
    fragment_ratio: NonZeroProbability = 0.5


class SpanCorruptionParams(SeededObjectiveParams):
    noise_density: Fraction = 0.15
    mean_noise_span_length: Annotated[float, in_range(1.0)] = 3.0


class PermutedLMParams(SeededObjectiveParams):
    partial_prediction_k: Annotated[float, in_range(1.0, lo_open=True)] = 6.0  # predict the last 1/K


_O = "lightning_modules.objectives."
OBJECTIVES = {
    _O + "mlm.MaskedLMObjective": MaskedLMParams,
    _O + "mlm_static.StaticMaskedLMObjective": MaskedLMParams,
    _O + "mlm_wwm.WholeWordMaskedLMObjective": MaskedLMParams,
    _O + "mlm_span.SpanMaskedLMObjective": SpanMaskedLMParams,
    _O + "tlm.TranslationLMObjective": TranslationLMParams,
    _O + "unilm.UnifiedLMObjective": UnifiedLMParams,
    _O + "rtd.ReplacedTokenDetectionObjective": ReplacedTokenDetectionParams,
    _O + "contrastive.ContrastiveSentenceObjective": ContrastiveSentenceParams,
    _O + "span_contrastive.SpanContrastiveObjective": SpanContrastiveParams,
    _O + "dae.DenoisingAutoencoderObjective": DenoisingAutoencoderParams,
    _O + "mass.MassObjective": MassParams,
    _O + "span_corruption.SpanCorruptionObjective": SpanCorruptionParams,
    _O + "plm.PermutedLMObjective": PermutedLMParams,
    _O + "clm.CausalLMObjective": NoArgumentsParams,
    _O + "bilm.BidirectionalLMObjective": NoArgumentsParams,
    _O + "nsp.NextSentencePredictionObjective": NoArgumentsParams,
    _O + "sop.SentenceOrderPredictionObjective": NoArgumentsParams,
}
