"""`task` (its `data` node is declared by its reader class in ptmlab.methods.readers). The task's semantics (metrics fit the kind, labels agree with
num_labels, heads fit the task) are ptmlab.contracts.task_checks'; this types the keys."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from ptmlab.methods.fields import Name, Node, NonNegativeInt, PositiveInt, TargetSlot, checked, in_range, is_int


def _labels(value: Any) -> bool:
    # File values in class-index order: strings ("0", "entailment") or, from an override, ints.
    return value is None or isinstance(value, list) and all(isinstance(v, str) or is_int(v) for v in value)


def _names(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))


MASK_SLOT = "[MASK]"  # where a prompt template's label word goes (tasks/templates.py)
TEMPLATE_FIELDS = ("{sentence}", "{sentence1}", "{sentence2}")


def _template(value: Any) -> bool:
    return isinstance(value, str) and value.count(MASK_SLOT) == 1 and any(f in value for f in TEMPLATE_FIELDS)


def _label_words(value: Any) -> bool:
    """A label's word, or its non-empty list of words."""
    if isinstance(value, str):
        return bool(value.strip())
    return isinstance(value, list) and bool(value) and all(isinstance(w, str) and w.strip() for w in value)


def _verbalizer(value: Any) -> bool:
    return isinstance(value, dict) and bool(value) and all(_label_words(v) for v in value.values())


class PromptNode(Node):
    """Prompt-based fine-tuning (PET, LM-BFF): the task as a cloze. `template` holds the task's
    fields ({sentence}, or {sentence1} and {sentence2}) and one [MASK] slot; `verbalizer` maps each
    label (its file value) to the word or words that stand for it."""

    template: Annotated[
        Any, checked(_template, "a string with one [MASK] slot and a {sentence} (or {sentence1}/{sentence2}) field")
    ]
    verbalizer: Annotated[Any, checked(_verbalizer, "a mapping label -> word or list of words")]


class TaskNode(Node):
    name: Name
    display_name: Name | None = None
    kind: Literal[
        "classification", "regression", "token_classification", "generation", "span_extraction", "multiple_choice"
    ]
    num_labels: PositiveInt | None = None
    labels: Annotated[Any, checked(_labels, "a list of label values")] = None
    label_names: list[str] | None = None
    metrics: Annotated[Any, checked(_names, "a metric name or a list of them")]
    main_metric: Name
    glue_metrics: list[str] | None = None
    superglue_metrics: list[str] | None = (
        None  # what a SuperGLUE task adds to that average (ptmlab.contracts.superglue)
    )
    few_shot: PositiveInt | None = None  # SuperGLUE: train records (lightning_modules/data/superglue.py)
    eval_metric_suffix: dict[str, str] | None = None  # per eval split, e.g. {dev_mismatched: _mm}
    submission_files: dict[str, str] | None = None  # per test split: GLUE submission file name
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
