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
    Dropout,
    NonNegativeInt,
    PositiveFloat,
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


MASK_SLOT = "[MASK]"  # where a prompt template's label word goes (tasks/templates.py)
TEMPLATE_FIELDS = ("{sentence}", "{sentence1}", "{sentence2}")


def _template(value: Any) -> bool:
    return isinstance(value, str) and value.count(MASK_SLOT) == 1 and any(f in value for f in TEMPLATE_FIELDS)


def _verbalizer(value: Any) -> bool:
    words = lambda v: (isinstance(v, str) and v.strip()) or (  # noqa: E731
        isinstance(v, list) and v and all(isinstance(w, str) and w.strip() for w in v))
    return isinstance(value, dict) and bool(value) and all(words(v) for v in value.values())


class PromptNode(Node):
    """Prompt-based fine-tuning (PET, LM-BFF): the task as a cloze. `template` holds the task's
    fields ({sentence}, or {sentence1} and {sentence2}) and one [MASK] slot; `verbalizer` maps each
    label (its file value) to the word or words that stand for it."""

    template: Annotated[Any, checked(_template, "a string with one [MASK] slot and a {sentence} "
                                                "(or {sentence1}/{sentence2}) field")]
    verbalizer: Annotated[Any, checked(_verbalizer, "a mapping label -> word or list of words")]


class TaskNode(Node):
    name: Name
    display_name: Name | None = None
    kind: Literal["classification", "regression", "token_classification", "generation", "span_extraction",
                  "multiple_choice"]
    num_labels: PositiveInt | None = None
    labels: Annotated[Any, checked(_labels, "a list of label values")] = None
    label_names: list[str] | None = None
    metrics: Annotated[Any, checked(_names, "a metric name or a list of them")]
    main_metric: Name
    glue_metrics: list[str] | None = None
    superglue_metrics: list[str] | None = None  # what a SuperGLUE task adds to that average (ptmlab.contracts.superglue)
    few_shot: PositiveInt | None = None  # SuperGLUE: train records (lightning_modules/data/superglue.py)
    eval_metric_suffix: dict[str, str] | None = None   # per eval split, e.g. {dev_mismatched: _mm}
    submission_files: dict[str, str] | None = None     # per test split: GLUE submission file name
    max_train_samples: PositiveInt | None = None
    max_eval_samples: PositiveInt | None = None
    max_length: Annotated[int, in_range(4, what="an integer")] = 128
    prompt: PromptNode | None = None
    # span extraction (lightning_modules/tasks/span_encoding.py, span_answers.py; task_checks checks the values)
    doc_stride: NonNegativeInt | None = None
    max_answer_length: PositiveInt | None = None
    n_best_size: PositiveInt | None = None
    no_answer_threshold: float | None = None
    # generation (lightning_modules/tasks/seq2seq_encoding.py; task_checks checks the values)
    max_target_length: int | None = None
    source_prefix: str | None = None
    label_smoothing: float | None = None
    generation: dict[str, Any] | None = None
    # multiple choice (lightning_modules/heads/multiple_choice_model.py)
    choice_scoring: Literal["auto", "head", "log_likelihood"] | None = None
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


class ConllReader(TargetNode):
    """CoNLL-style columns (lightning_modules/data/conll_columns.py): word and tag column indices,
    negative counting from the end; whether one is inside a file's rows is known only on reading."""

    train: Name
    dev: Name
    test: Name | None = None
    token_column: int = 0
    label_column: int = -1
    repair: bool = True

    @model_validator(mode="after")
    def _two_columns(self):
        if self.token_column == self.label_column:
            raise ValueError(f"{NODE}.token_column and {NODE}.label_column are both {self.token_column}")
        return self


class ConlluTagReader(TargetNode):
    """CoNLL-U with a UD column as the label (lightning_modules/data/conllu_tags.py)."""

    train: Name
    dev: Name
    test: Name | None = None
    label_column: Literal["upos", "xpos", "deprel"] = "upos"
    max_sentences: PositiveInt | None = None


class Seq2SeqReader(TargetNode):
    """Source/target pairs (lightning_modules/data/seq2seq_files.py): per split a JSONL path or
    {source, target} line-aligned files; one or several target keys."""

    train: str | dict[str, str | None]
    dev: str | dict[str, str | None]
    test: str | dict[str, str | None] | None = None
    source_field: Name = "source"
    target_field: Name | list[Name] = "target"


class SquadReader(TargetNode):
    """SQuAD v1.1 / v2.0 JSON (lightning_modules/data/squad_json.py)."""

    train: Name
    dev: Name


class SuperGlueReader(TargetNode):
    """SuperGLUE JSONL (lightning_modules/data/superglue.py); train may be absent with train_from_dev."""

    task: Literal["boolq", "cb", "rte", "wic", "wsc", "multirc"]
    train: Name | None = None
    dev: Name
    few_shot: PositiveInt | None = None
    train_from_dev: PositiveInt | None = None
    seed: int = 42


class MultipleChoiceReader(TargetNode):
    """A context and N choices per JSON line (lightning_modules/data/choice_jsonl.py)."""

    train: Name
    dev: Name
    test: Name | None = None
    context_field: Name | list[Name] | None = "context"
    choices_field: Name | list[Name] = "choices"   # a list field, [field, ...], or a pattern with {i}
    label_field: Name = "label"
    id_field: Name | None = None
    connective_field: Name | None = None
    connectives: dict[str, str] | None = None
    train_from_dev: PositiveInt | None = None     # a seeded split of dev when only dev exists
    split_seed: NonNegativeInt = 0


READERS = {
    "lightning_modules.data.superglue.SuperGlueReader": SuperGlueReader,
    "lightning_modules.data.choice_jsonl.MultipleChoiceReader": MultipleChoiceReader,
    "lightning_modules.data.seq2seq_files.Seq2SeqReader": Seq2SeqReader,
    "lightning_modules.data.conll_columns.ConllReader": ConllReader,
    "lightning_modules.data.conllu_tags.ConlluTagReader": ConlluTagReader,
    "lightning_modules.data.squad_json.SquadReader": SquadReader,
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


class LoRA(Adaptation):
    rank: PositiveInt = 8
    alpha: PositiveFloat = 16.0
    dropout: Dropout = 0.0
    target_modules: Annotated[list[Name], checked(bool, "a non-empty list of module names")] = ["query", "value"]
    merge: bool = True


class PromptTuning(Adaptation):
    num_tokens: PositiveInt = 20
    init: Literal["random", "vocab", "words"] = "vocab"
    init_words: list[Name] | None = None

    @model_validator(mode="after")
    def _words_for_words(self):
        if self.init == "words" and not self.init_words:
            raise ValueError(f"{NODE}.init=words needs {NODE}.init_words (the words whose embeddings start the prompt)")
        return self


class PrefixTuning(Adaptation):
    num_tokens: PositiveInt = 16
    reparameterize: bool = False
    reparameterize_hidden: PositiveInt = 512


class PromptBased(Adaptation):
    freeze_backbone: bool = False
    demonstrations: NonNegativeInt = 0


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
    _A + "lora.LoRA": LoRA,
    _A + "bitfit.BitFit": Adaptation,
    _A + "prompt_tuning.PromptTuning": PromptTuning,
    _A + "prefix_tuning.PrefixTuning": PrefixTuning,
    _A + "prompt_based.PromptBasedFineTuning": PromptBased,
    _A + "prompt_based.ZeroShotPrompting": PromptBased,
    _A + "zero_shot.ZeroShot": Adaptation,
}
