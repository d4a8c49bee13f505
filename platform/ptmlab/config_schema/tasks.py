"""`task` (its reader classes in lightning_modules/data/) and `adaptation`
(lightning_modules/adaptation/). The task's semantics (metrics fit the kind, labels agree with
num_labels, heads fit the task) are ptmlab.contracts.task_checks'; this types the keys."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import model_validator

from ptmlab.config_schema.fields import (
    NODE,
    Name,
    Node,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveInt,
    TargetNode,
    TargetSlot,
    checked,
    in_range,
    is_int,
)


def _labels(value: Any) -> bool:
    # File values in class-index order: strings ("0", "entailment") or, from an override, ints.
    return value is None or isinstance(value, list) and all(isinstance(v, str) or is_int(v) for v in value)


def _names(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))


class TaskNode(Node):
    name: Name
    display_name: Name | None = None
    kind: Literal["classification", "regression"]
    num_labels: PositiveInt | None = None
    labels: Annotated[Any, checked(_labels, "a list of label values")] = None
    label_names: list[str] | None = None
    metrics: Annotated[Any, checked(_names, "a metric name or a list of them")]
    main_metric: Name
    glue_metrics: list[str] | None = None
    eval_metric_suffix: dict[str, str] | None = None   # per eval split, e.g. {dev_mismatched: _mm}
    submission_files: dict[str, str] | None = None     # per test split: GLUE submission file name
    max_train_samples: PositiveInt | None = None
    max_eval_samples: PositiveInt | None = None
    max_length: Annotated[int, in_range(4, what="an integer")] = 128
    data: TargetSlot


class GlueReader(TargetNode):
    task: Literal["cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli"]
    data_dir: Name | None = None
    source: Literal["local", "hf"] = "local"
    hf_name: Name = "nyu-mll/glue"
    files: dict[str, Name] | None = None   # per-split file name overrides
    read_test: bool = True

    @model_validator(mode="after")
    def _local_needs_a_folder(self):
        if self.source == "local" and not self.data_dir:
            raise ValueError(f"{NODE}.data_dir is required for {NODE}.source=local")
        return self


class SentEvalReader(TargetNode):
    task: Literal["MR", "CR", "SUBJ", "MPQA"]
    data_dir: Name


class TabularReader(TargetNode):
    train: Name
    dev: Name
    test: Name | None = None
    text_fields: Annotated[list[Name], checked(lambda v: len(v) in (1, 2), "one or two field names")]
    label_field: Name | None = "label"
    id_field: Name | None = None
    format: Literal["auto", "tsv", "csv", "jsonl"] = "auto"
    quoting: Literal["none", "minimal"] | None = None


READERS = {
    "lightning_modules.data.glue.GlueReader": GlueReader,
    "lightning_modules.data.senteval.SentEvalReader": SentEvalReader,
    "lightning_modules.data.tabular.TabularReader": TabularReader,
}


class Adaptation(TargetNode):
    """`name` and `compatible_families` are read by the platform, not passed to the class."""

    name: Name
    compatible_families: list[Name] | None = None


class Adapters(Adaptation):
    bottleneck: PositiveInt = 64


class GradualUnfreezing(Adaptation):
    unfreeze_every: PositiveInt = 50


class ChainThaw(Adaptation):
    steps_per_phase: PositiveInt = 50


class DiscriminativeLR(Adaptation):
    decay: Annotated[float, in_range(0.0, 1.0, lo_open=True)] = 0.9   # layer l of L: lr·decay^(L-l)


class L2SP(Adaptation):
    alpha: NonNegativeFloat = 0.01


class FreezeLayers(Adaptation):
    num_frozen: NonNegativeInt | None = None
    num_trainable: NonNegativeInt | None = None

    @model_validator(mode="after")
    def _exactly_one(self):
        if (self.num_frozen is None) == (self.num_trainable is None):
            raise ValueError(f"{NODE} needs exactly one of {NODE}.num_frozen, {NODE}.num_trainable")
        return self


_A = "lightning_modules.adaptation."
ADAPTATIONS = {
    _A + "full.FullFineTuning": Adaptation,
    _A + "feature.FeatureBased": Adaptation,
    _A + "adapters.Adapters": Adapters,
    _A + "gradual_unfreezing.GradualUnfreezing": GradualUnfreezing,
    _A + "chain_thaw.ChainThaw": ChainThaw,
    _A + "discriminative_lr.DiscriminativeLR": DiscriminativeLR,
    _A + "l2sp.L2SP": L2SP,
    _A + "freeze_layers.FreezeLayers": FreezeLayers,
}
