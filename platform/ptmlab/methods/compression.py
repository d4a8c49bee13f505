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

Sparsity = Annotated[float, in_range(0.0, 1.0, hi_open=True, what="a sparsity")]
Share = Annotated[float, in_range(0.0, 1.0, lo_open=True, hi_open=True, what="a share")]
Probability = Annotated[float, in_range(0.0, 1.0, what="a probability")]
Backend = Name  # the method names the backends it knows (and refuses one missing on this machine)


class CompressionParams(TargetNode):
    """What every method takes. The one statement of each method's parameters, defaults and bounds:
    its class (lightning_modules/compression/) is built from the validated declaration, and
    conf/compression/*.yaml is written from it (`python -m ptmlab.declared_yaml`)."""

    name: Name
    finetune_epochs: NonNegativeInt = 0  # recovery fine-tuning after compressing
    lr: PositiveFloat | None = None  # null: stage.lr


class DistillParams(CompressionParams):
    """Knowledge distillation from the fine-tuned source. Defaults: a 3-layer student from every
    2nd layer of a 6-layer teacher, soft targets at T=2 (scaled by T²) and hard labels, half each,
    2 epochs. `student_model` instead: any model node, e.g. `{name: small, family: transformer,
    backbone: {_target_: lightning_modules.models.transformer.TransformerEncoder, hidden_size: 256,
    ...}}` (its own architecture, random init; `student_layers: null`). `layer_map`: `[[student
    layer, teacher layer], ...]`, 1-based layer outputs, 0 = embeddings; null: student layer i ↔
    teacher layer i·k (k = teacher layers ÷ student layers), e.g. 6→3: `[[1, 2], [2, 4], [3, 6]]`."""

    student_layers: PositiveInt | None = 3  # every k-th teacher layer (DistilBERT/PKD init); null with student_model
    student_model: dict[str, Any] | None = None  # or any model node (its own architecture, random init)
    epochs: PositiveInt = 2
    temperature: PositiveFloat = 2.0
    kd_weight: NonNegativeFloat = 0.5  # soft-target KL · T²
    ce_weight: NonNegativeFloat = 0.5  # gold labels
    hidden_weight: NonNegativeFloat = 0.0  # hidden-state MSE through layer_map (projected when widths differ)
    attention_weight: NonNegativeFloat = 0.0  # attention KL, last `attention_layers` layers (MiniLM)
    embedding_weight: NonNegativeFloat = 0.0  # embedding-output distance (DistilBERT)
    embedding_loss: Literal["mse", "cosine"] = "mse"
    layer_map: list[list[NonNegativeInt]] | None = None  # [[student layer, teacher layer], ...]; null: every k-th
    projection: bool = True  # a learned linear map when student and teacher widths differ
    attention_layers: PositiveInt = 1  # attention KL over the last n layers (MiniLM)
    cache_logits: bool = True  # teacher logits computed once per teacher and training data
    control: bool = True  # also train the same student without the teacher (reported beside it)
    # generation: train on the teacher's greedy outputs of the training sources (Kim & Rush)
    sequence_level: bool = False


class ControlledParams(CompressionParams):
    """A method that trains after compressing: `control` gives the source the same extra training
    without compression (lightning_modules/compression/control.py), reported beside it; false marks
    the retention "with extra training"."""

    control: bool = True


class PruneHeadsParams(ControlledParams):
    """Structured attention-head pruning by importance (Michel et al. 2019)."""

    finetune_epochs: NonNegativeInt = 1  # one recovery epoch unless told otherwise
    fraction: Share = 0.3  # share of all heads removed
    steps: PositiveInt = 3  # iterative: importance measured again after each step
    importance_batches: PositiveInt = 32


class PruneMagnitudeParams(ControlledParams):
    """Global unstructured magnitude pruning over the pruned weights (`scope`: encoder, every Linear
    of the layers; all, every Linear)."""

    finetune_epochs: NonNegativeInt = 1  # one recovery epoch unless told otherwise
    sparsity: Sparsity = 0.4
    schedule: Literal["one_shot", "cubic"] = "one_shot"  # cubic: Zhu & Gupta, during the fine-tune
    prune_every: PositiveInt = 10  # cubic: steps between mask updates
    scope: Literal["encoder", "all"] = "encoder"


class DropLayersParams(ControlledParams):
    """Layer dropping; the first set of `layers`, `keep_bottom`, `keep_every` decides."""

    keep_every: PositiveInt | None = 2  # layers k-1, 2k-1, ...
    keep_bottom: PositiveInt | None = None
    layers: list[NonNegativeInt] | None = None  # explicit 0-based list


class QuantizeDynamicParams(CompressionParams):
    """Post-training dynamic int8: every Linear's weights int8 per output channel, activations
    quantized per batch; embeddings weight-only int8."""

    backend: Backend = "torch.ao"  # torch.ao | torchao (refused where not installed)
    # null: int8 tables, but a generator's (its output layer) stays fp32; false: all fp32
    embeddings: bool | None = None


class QuantizeQATParams(QuantizeDynamicParams):
    """Quantization-aware training then int8: Linear weights fake-quantized (int8, per channel)
    during a short fine-tune, then converted as quantize_dynamic converts."""

    finetune_epochs: NonNegativeInt = 1  # QAT trains with fake quantization: at least one epoch
    embeddings: bool = True
    control: bool = True  # as ControlledParams


class CastHalfParams(CompressionParams):
    """Half-precision weights."""

    dtype: Literal["bfloat16", "float16"] = "bfloat16"


class LowRankParams(ControlledParams):
    """SVD factorisation of Linear layers; the first of `rank`, `energy`, `param_ratio` that is set
    decides each matrix's rank."""

    finetune_epochs: NonNegativeInt = 1  # one recovery epoch unless told otherwise
    param_ratio: Share | None = 0.5  # share of each matrix's parameters kept
    rank: PositiveInt | None = None
    energy: Share | None = None  # share of the squared singular values kept
    scope: Literal["encoder", "all"] = "encoder"


class TheseusParams(ControlledParams):
    """BERT-of-Theseus progressive module replacing."""

    successor_layers: PositiveInt = 3
    replace_rate: Probability = 0.5  # probability a block is replaced at the start ...
    replace_rate_end: Probability = 1.0  # ... rising linearly to this at the end
    epochs: PositiveInt = 1  # replacing; finetune_epochs: the successor alone, afterwards


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
