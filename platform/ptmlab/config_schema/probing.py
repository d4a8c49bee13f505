"""`stage=probe` and the `probe` group (conf/probe/: a suite of probe tasks and its data)."""

from __future__ import annotations

from typing import Literal

from ptmlab.config_schema.fields import Dropout, Name, Node, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt
from ptmlab.config_schema.stages import Stage

# lightning_modules/stages/probe.py FAMILY_OF
ProbeTask = Literal["upos", "xpos", "deprel", "distance", "depth", "sentence_length", "tree_depth", "bigram_shift",
                    "tense", "subject_number", "attention", "lama"]


class TokenProbeSettings(Node):
    kind: Literal["linear", "mlp"] = "linear"
    hidden_size: PositiveInt = 256
    dropout: Dropout = 0.0
    epochs: PositiveInt = 6
    lr: PositiveFloat = 3e-3
    batch_size: PositiveInt = 512
    weight_decay: NonNegativeFloat = 0.0
    control: bool = True
    scalar_mix: bool = True


class StructuralProbeSettings(Node):
    rank: PositiveInt = 64
    epochs: PositiveInt = 10
    lr: PositiveFloat = 1e-3
    batch_size: PositiveInt = 20
    weight_decay: NonNegativeFloat = 0.0


class AttentionSettings(Node):
    max_sentences: PositiveInt = 300


class Probe(Stage):
    label: Name | None = None          # +stage.label=<name>: the model's name in results (default: derived)
    alignment: Literal["first", "last", "mean"] = "first"
    layers: list[NonNegativeInt] | None = None
    batch_size: PositiveInt = 32
    shard_sentences: PositiveInt = 256
    random_init_baseline: bool = True
    token: TokenProbeSettings = TokenProbeSettings()
    structural: StructuralProbeSettings = StructuralProbeSettings()
    attention: AttentionSettings = AttentionSettings()


class ProbeData(Node):
    train: Name | None = None       # CoNLL-U files
    eval: Name | None = None
    max_train_sentences: PositiveInt | None = None
    max_eval_sentences: PositiveInt | None = None
    max_sentence_words: PositiveInt | None = None
    path: Name | None = None        # LAMA jsonl file or folder
    relations: Name | None = None   # LAMA templates file (null: relations.jsonl beside or above `path`)


class ProbeNode(Node):
    name: Name
    tasks: list[ProbeTask]
    data: ProbeData


PROBE_STAGES = {"lightning_modules.stages.probe.run_probe": Probe}
