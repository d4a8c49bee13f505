"""`objective`: the objective node (one `module`, or weighted `objectives`) and one schema per
objective class (lightning_modules/objectives/, constructor arguments other than the backbone
and tokenizer the stage passes)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import model_validator

from ptmlab.config_schema.fields import (
    NODE,
    Fraction,
    Name,
    Node,
    NonNegativeFloat,
    NonNegativeInt,
    NonZeroProbability,
    PositiveFloat,
    PositiveInt,
    Probability,
    TargetNode,
    TargetSlot,
    in_range,
)


class WeightedObjective(Node):
    weight: NonNegativeFloat = 1.0
    module: TargetSlot


class ObjectiveNode(Node):
    name: Name
    compatible_families: list[Name] | None = None
    # data keys the objective needs (ptmlab.contracts.objective_checks compares them with `data`)
    requires_data: dict[Literal["name", "construction", "pair_negative"], str] | None = None
    module: TargetSlot | None = None
    objectives: dict[str, WeightedObjective] | None = None

    @model_validator(mode="after")
    def _one_loss(self):
        if not self.module and not self.objectives:
            raise ValueError(f"{NODE} needs `module` (one loss) or `objectives` (weighted losses)")
        if self.objectives and not any(part.weight > 0 for part in self.objectives.values()):
            raise ValueError(f"{NODE}.objectives: every weight is 0")
        return self


class Seeded(TargetNode):
    seed: NonNegativeInt | None = None   # null: the run seed


class NoArguments(TargetNode):
    """Objectives whose only arguments are the backbone and tokenizer."""


class MaskedLM(Seeded):
    mask_prob: NonZeroProbability = 0.15          # 0 masks nothing: no loss
    mask_token_prob: Probability = 0.8
    random_token_prob: Probability = 0.1

    @model_validator(mode="after")
    def _replacements(self):
        if self.mask_token_prob + self.random_token_prob > 1.0 + 1e-9:
            raise ValueError(f"{NODE}.mask_token_prob={self.mask_token_prob} + {NODE}.random_token_prob="
                             f"{self.random_token_prob} exceeds 1")
        return self


class SpanMaskedLM(MaskedLM):
    geometric_p: NonZeroProbability = 0.2
    max_span_length: PositiveInt = 10
    whole_words: bool = True
    span_boundary_objective: bool = True
    sbo_weight: NonNegativeFloat = 1.0


class TranslationLM(MaskedLM):
    reset_positions: bool = True


class UnifiedLM(MaskedLM):
    mode_weights: dict[Literal["bidirectional", "seq2seq", "left_to_right", "right_to_left"],
                       NonNegativeFloat] | None = None

    @model_validator(mode="after")
    def _some_mode(self):
        if self.mode_weights is not None and sum(self.mode_weights.values()) <= 0:
            raise ValueError(f"{NODE}.mode_weights must give a positive weight to at least one mode")
        return self


class ReplacedTokenDetection(Seeded):
    mask_prob: NonZeroProbability = 0.15
    mask_token_prob: Probability = 0.85
    rtd_weight: NonNegativeFloat = 50.0
    sampling_temperature: PositiveFloat = 1.0


class ContrastiveSentence(TargetNode):
    temperature: PositiveFloat = 0.05
    pooling: Literal["mean", "cls"] = "mean"
    projection: bool = True


class SpanContrastive(Seeded):
    max_ngram: PositiveInt = 5
    temperature: PositiveFloat = 0.1
    projection_size: PositiveInt = 128
    global_pooling: Literal["mean", "cls"] = "mean"


class DenoisingAutoencoder(Seeded):
    token_masking: Probability = 0.0
    token_deletion: Probability = 0.0
    text_infilling: Probability = 0.3
    poisson_lambda: NonNegativeFloat = 3.0
    sentence_permutation: bool = True
    document_rotation: bool = False

    @model_validator(mode="after")
    def _some_noise(self):
        if not (self.token_masking or self.token_deletion or self.text_infilling
                or self.sentence_permutation or self.document_rotation):
            raise ValueError(f"{NODE}: every noising function is off; set one of token_masking, token_deletion, "
                             f"text_infilling (rates > 0), sentence_permutation or document_rotation (true)")
        return self


class Mass(Seeded):
    fragment_ratio: NonZeroProbability = 0.5


class SpanCorruption(Seeded):
    noise_density: Fraction = 0.15
    mean_noise_span_length: Annotated[float, in_range(1.0)] = 3.0


class PermutedLM(Seeded):
    partial_prediction_k: Annotated[float, in_range(1.0, lo_open=True)] = 6.0  # predict the last 1/K


_O = "lightning_modules.objectives."
OBJECTIVES = {
    _O + "mlm.MaskedLMObjective": MaskedLM,
    _O + "mlm_static.StaticMaskedLMObjective": MaskedLM,
    _O + "mlm_wwm.WholeWordMaskedLMObjective": MaskedLM,
    _O + "mlm_span.SpanMaskedLMObjective": SpanMaskedLM,
    _O + "tlm.TranslationLMObjective": TranslationLM,
    _O + "unilm.UnifiedLMObjective": UnifiedLM,
    _O + "rtd.ReplacedTokenDetectionObjective": ReplacedTokenDetection,
    _O + "contrastive.ContrastiveSentenceObjective": ContrastiveSentence,
    _O + "span_contrastive.SpanContrastiveObjective": SpanContrastive,
    _O + "dae.DenoisingAutoencoderObjective": DenoisingAutoencoder,
    _O + "mass.MassObjective": Mass,
    _O + "span_corruption.SpanCorruptionObjective": SpanCorruption,
    _O + "plm.PermutedLMObjective": PermutedLM,
    _O + "clm.CausalLMObjective": NoArguments,
    _O + "bilm.BidirectionalLMObjective": NoArguments,
    _O + "nsp.NextSentencePredictionObjective": NoArguments,
    _O + "sop.SentenceOrderPredictionObjective": NoArguments,
}
