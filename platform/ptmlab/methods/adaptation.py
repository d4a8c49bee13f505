"""`adaptation`: one declaration per mode (lightning_modules/adaptation/, constructor arguments
other than the backbone the stage passes)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import model_validator

from ptmlab.methods.fields import (
    NODE,
    Dropout,
    Name,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    TargetNode,
    checked,
    in_range,
)


class AdaptationParams(TargetNode):
    """`name` and `compatible_families` are read by the platform, not passed to the class."""

    name: Name
    compatible_families: list[Name] | None = None


class AdaptersParams(AdaptationParams):
    bottleneck: PositiveInt = 64


class GradualUnfreezingParams(AdaptationParams):
    unfreeze_every: PositiveInt = 50


class ChainThawParams(AdaptationParams):
    steps_per_phase: PositiveInt = 50


class DiscriminativeLRParams(AdaptationParams):
    decay: Annotated[float, in_range(0.0, 1.0, lo_open=True)] = 0.9  # layer l of L: lr·decay^(L-l)


class L2SPParams(AdaptationParams):
    alpha: NonNegativeFloat = 0.01


class FreezeLayersParams(AdaptationParams):
    num_frozen: NonNegativeInt | None = None
    num_trainable: NonNegativeInt | None = None

    @model_validator(mode="after")
    def _exactly_one(self):
        if (self.num_frozen is None) == (self.num_trainable is None):
            raise ValueError(f"{NODE} needs exactly one of {NODE}.num_frozen, {NODE}.num_trainable")
        return self


class LoRAParams(AdaptationParams):
    """LoRA (lightning_modules/adaptation/lora.py). The one statement of its parameters: the YAML
    holds only what differs, the compose-time check, the API and the docs' reference read this."""

    rank: PositiveInt = 8
    alpha: PositiveFloat = 16.0  # the update is scaled by alpha / rank
    dropout: Dropout = 0.0
    target_modules: Annotated[list[Name], checked(bool, "a non-empty list of module names")] = ["query", "value"]
    merge: bool = True  # fold B·A into W after training: the exported backbone is a plain one
    use_rslora: bool = False  # scale by alpha / sqrt(rank) (rank-stabilized LoRA, Kalajdzievski 2023)


class PromptTuningParams(AdaptationParams):
    num_tokens: PositiveInt = 20
    init: Literal["random", "vocab", "words"] = "vocab"
    init_words: list[Name] | None = None

    @model_validator(mode="after")
    def _words_for_words(self):
        if self.init == "words" and not self.init_words:
            raise ValueError(f"{NODE}.init=words needs {NODE}.init_words (the words whose embeddings start the prompt)")
        return self


class PrefixTuningParams(AdaptationParams):
    num_tokens: PositiveInt = 16
    reparameterize: bool = False
    reparameterize_hidden: PositiveInt = 512


class PromptBasedParams(AdaptationParams):
    freeze_backbone: bool = False
    demonstrations: NonNegativeInt = 0


_A = "lightning_modules.adaptation."
ADAPTATIONS = {
    _A + "full.FullFineTuning": AdaptationParams,
    _A + "feature.FeatureBased": AdaptationParams,
    _A + "adapters.Adapters": AdaptersParams,
    _A + "gradual_unfreezing.GradualUnfreezing": GradualUnfreezingParams,
    _A + "chain_thaw.ChainThaw": ChainThawParams,
    _A + "discriminative_lr.DiscriminativeLR": DiscriminativeLRParams,
    _A + "l2sp.L2SP": L2SPParams,
    _A + "freeze_layers.FreezeLayers": FreezeLayersParams,
    _A + "lora.LoRA": LoRAParams,
    _A + "bitfit.BitFit": AdaptationParams,
    _A + "prompt_tuning.PromptTuning": PromptTuningParams,
    _A + "prefix_tuning.PrefixTuning": PrefixTuningParams,
    _A + "prompt_based.PromptBasedFineTuning": PromptBasedParams,
    _A + "prompt_based.ZeroShotPrompting": PromptBasedParams,
    _A + "zero_shot.ZeroShot": AdaptationParams,
}
