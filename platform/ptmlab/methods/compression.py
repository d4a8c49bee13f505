"""`compression`: one declaration per method class in lightning_modules/compression/. Ranges that
need no model are checked here (a sparsity outside [0, 1), a fraction of heads, a rank below 1);
those that need the source model (a rank larger than its matrix, a layer map naming a missing
layer) are checked by the method before any training."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from ptmlab.methods.fields import (
    Name,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    TargetNode,
    in_range,
)

Sparsity = Annotated[float, in_range(0.0, 1.0, hi_open=True, what="a sparsity in [0, 1)")]
Share = Annotated[float, in_range(0.0, 1.0, lo_open=True, hi_open=True, what="a share in (0, 1)")]
Probability = Annotated[float, in_range(0.0, 1.0, what="a probability")]
Backend = Name  # the method names the backends it knows (and refuses one missing on this machine)


class CompressionParams(TargetNode):
    name: Name
    finetune_epochs: NonNegativeInt = 0  # recovery fine-tuning after compressing
    lr: PositiveFloat | None = None  # null: stage.lr


class DistillParams(CompressionParams):
    student_layers: PositiveInt | None = 3  # every-k-th teacher layer (DistilBERT/PKD init)
    student_model: dict[str, Any] | None = None  # or any model node (its own architecture, random init)
    epochs: PositiveInt = 2
    temperature: PositiveFloat = 2.0
    kd_weight: NonNegativeFloat = 0.5
    ce_weight: NonNegativeFloat = 0.5
    hidden_weight: NonNegativeFloat = 0.0
    attention_weight: NonNegativeFloat = 0.0
    embedding_weight: NonNegativeFloat = 0.0
    embedding_loss: Literal["mse", "cosine"] = "mse"
    layer_map: list[list[NonNegativeInt]] | None = (
        None  # [[student layer, teacher layer], ...]; 1-based, 0 = embeddings
    )
    projection: bool = True  # a learned linear map when student and teacher widths differ
    attention_layers: PositiveInt = 1  # attention KL over the last n layers (MiniLM)
    cache_logits: bool = True
    control: bool = True  # also train the same student without the teacher
    sequence_level: bool = False  # generation: train on the teacher's greedy outputs (Kim & Rush)


class ControlledParams(CompressionParams):
    """A method that trains after compressing: `control` gives the source the same extra training
    without compression (lightning_modules/compression/control.py); false marks the retention
    "with extra training"."""

    control: bool = True


class PruneHeadsParams(ControlledParams):
    finetune_epochs: NonNegativeInt = 1  # one recovery epoch unless told otherwise
    fraction: Share = 0.3
    steps: PositiveInt = 3
    importance_batches: PositiveInt = 32


class PruneMagnitudeParams(ControlledParams):
    finetune_epochs: NonNegativeInt = 1  # one recovery epoch unless told otherwise
    sparsity: Sparsity = 0.4
    schedule: Literal["one_shot", "cubic"] = "one_shot"
    prune_every: PositiveInt = 10
    scope: Literal["encoder", "all"] = "encoder"


class DropLayersParams(ControlledParams):
    keep_every: PositiveInt | None = 2
    keep_bottom: PositiveInt | None = None
    layers: list[NonNegativeInt] | None = None


class QuantizeDynamicParams(CompressionParams):
    backend: Backend = "torch.ao"
    embeddings: bool | None = None  # null: int8 tables except a generator's (its output layer)


class QuantizeQATParams(QuantizeDynamicParams):
    finetune_epochs: NonNegativeInt = 1  # QAT trains with fake quantization: at least one epoch
    embeddings: bool = True
    control: bool = True  # as ControlledParams


class CastHalfParams(CompressionParams):
    dtype: Literal["bfloat16", "float16"] = "bfloat16"


class LowRankParams(ControlledParams):
    finetune_epochs: NonNegativeInt = 1  # one recovery epoch unless told otherwise
    param_ratio: Share | None = 0.5
    rank: PositiveInt | None = None
    energy: Share | None = None
    scope: Literal["encoder", "all"] = "encoder"


class TheseusParams(ControlledParams):
    successor_layers: PositiveInt = 3
    replace_rate: Probability = 0.5
    replace_rate_end: Probability = 1.0
    epochs: PositiveInt = 1


_C = "lightning_modules.compression."
COMPRESSIONS = {
    _C + "distill.Distill": DistillParams,
    _C + "prune_heads.PruneHeads": PruneHeadsParams,
    _C + "prune_magnitude.PruneMagnitude": PruneMagnitudeParams,
    _C + "drop_layers.DropLayers": DropLayersParams,
    _C + "quantize_dynamic.QuantizeDynamic": QuantizeDynamicParams,
    _C + "quantize_qat.QuantizeQAT": QuantizeQATParams,
    _C + "cast_half.CastHalf": CastHalfParams,
    _C + "low_rank.LowRank": LowRankParams,
    _C + "theseus.Theseus": TheseusParams,
}
