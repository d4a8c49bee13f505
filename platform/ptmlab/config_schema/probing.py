"""`stage=probe` and the `probe` group (conf/probe/: a suite of probe tasks and its data); the probes' own
keys (`stage.token`, `stage.structural`) are declared in ptmlab.methods.probing."""

from __future__ import annotations

from typing import Literal

from ptmlab.config_schema.stages import Stage
from ptmlab.methods.fields import Name, Node, NonNegativeInt, PositiveInt
from ptmlab.methods.probing import StructuralProbeParams, TokenProbeParams

# lightning_modules/stages/probe.py FAMILY_OF
ProbeTask = Literal[
    "upos",
    "xpos",
    "deprel",
    "distance",
    "depth",
    "sentence_length",
    "tree_depth",
    "bigram_shift",
    "tense",
    "subject_number",
    "attention",
    "anisotropy",
    "self_similarity",
    "intra_sentence_similarity",
    "lama",
]


class AttentionSettings(Node):
    """`stage.attention`: how many sentences the stage feeds the attention analysis (a function of
    the backbone's maps with nothing to declare)."""

    max_sentences: PositiveInt = 300


class Probe(Stage):
    label: Name | None = None  # +stage.label=<name>: the model's name in results (default: derived)
    alignment: Literal["first", "last", "mean"] = "first"
    layers: list[NonNegativeInt] | None = None
    batch_size: PositiveInt = 32
    shard_sentences: PositiveInt = 256
    random_init_baseline: bool = True
    token: TokenProbeParams = TokenProbeParams()
    structural: StructuralProbeParams = StructuralProbeParams()
    attention: AttentionSettings = AttentionSettings()


class ProbeData(Node):
    train: Name | None = None  # CoNLL-U files
    eval: Name | None = None
    max_train_sentences: PositiveInt | None = None
    max_eval_sentences: PositiveInt | None = None
    max_sentence_words: PositiveInt | None = None
    path: Name | None = None  # LAMA jsonl file or folder
    relations: Name | None = None  # LAMA templates file (null: relations.jsonl beside or above `path`)


class ProbeNode(Node):
    name: Name
    tasks: list[ProbeTask]
    data: ProbeData


PROBE_STAGES = {"lightning_modules.stages.probe.run_probe": Probe}
