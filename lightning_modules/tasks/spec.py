"""A downstream task as the finetune stage sees it: its spec (from `conf/task/...`) and its
splits read, label-checked and subset (`max_train_samples` / `max_eval_samples`, the first N rows,
as in Hugging Face's run_glue.py)."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field

from omegaconf import DictConfig, OmegaConf

from lightning_modules.data.tagged import TaggedSentence, is_bio, sort_tags
from lightning_modules.data.task_data import Split, TaskData, TextExample
from ptmlab.contracts import ConfigError, DataError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TaskSpec:
    name: str
    kind: str  # classification | regression | token_classification | generation | span_extraction | multiple_choice
    labels: tuple[str, ...] | None  # raw file values in class-index order; None: regression/inferred
    metrics: tuple[str, ...]
    main_metric: str
    glue_metrics: tuple[str, ...] = ()  # what the task contributes to the GLUE score (mean of these)
    label_names: tuple[str, ...] | None = None  # human names (CoLA: unacceptable, acceptable)
    eval_metric_suffix: dict[str, str] = field(default_factory=dict)  # split -> suffix (mnli: _mm)
    submission_files: dict[str, str] = field(default_factory=dict)  # test split -> GLUE file name
    max_train_samples: int | None = None
    max_eval_samples: int | None = None
    max_length: int = 128
    # Prompt-based modes (tasks/templates.py): {"template": str, "verbalizer": {label: [words]}}
    prompt: dict | None = None
    # Span extraction (tasks/span_encoding.py, tasks/span_answers.py): window overlap in sub-words, the
    # longest answer in sub-words, start/end candidates per window, the v2.0 no-answer threshold
    # (None: chosen on dev)
    doc_stride: int = 128
    max_answer_length: int = 30
    n_best_size: int = 20
    no_answer_threshold: float | None = None
    # Generation (task.kind: generation; tasks/seq2seq_encoding.py, tasks/decoding.py): max_length is
    # the source's limit; the target's, a source prefix, label smoothing and the decoding settings.
    max_target_length: int = 128
    source_prefix: str | None = None
    label_smoothing: float = 0.0
    generation: dict | None = None
    # Multiple choice (heads/multiple_choice_model.py): head | log_likelihood, or auto (the finetune
    # stage resolves it: log_likelihood for a causal decoder, head otherwise)
    choice_scoring: str = "auto"

    @property
    def is_regression(self) -> bool:
        return self.kind == "regression"

    @property
    def is_token_level(self) -> bool:
        """One label per word (token classification): per-token head, seqeval metrics."""
        return self.kind == "token_classification"

    @property
    def is_span_level(self) -> bool:
        """A start and an end per answer (extractive QA): start/end logits per token, SQuAD metrics."""
        return self.kind == "span_extraction"

    @property
    def is_generation(self) -> bool:
        """A target text per example (references as labels): a decoder, teacher forcing, BLEU/ROUGE."""
        return self.kind == "generation"

    @property
    def is_multiple_choice(self) -> bool:
        """N choices per example, one score each (the head is 1 wide), the right one's index as label."""
        return self.kind == "multiple_choice"

    @property
    def num_labels(self) -> int:
        """Output size of the head: 1 for regression and multiple choice, else the size of the label set."""
        if self.is_regression or self.is_multiple_choice:
            return 1
        if self.is_span_level:
            return 2  # a start and an end logit per token
        if self.labels is None:
            raise ConfigError(f"task {self.name}: labels not known yet (inferred by load_task)")
        return len(self.labels)

    def metric_key(self, metric: str, split: str) -> str:
        """Name a metric on an eval split gets in `metrics` (accuracy on dev_mismatched -> accuracy_mm)."""
        return metric + self.eval_metric_suffix.get(split, "")

    def to_dict(self) -> dict:
        """JSON-ready (the `tasks` entries of a saved task model's manifest)."""
        return {
            f.name: (list(v) if isinstance(v, tuple) else v)
            for f in dataclasses.fields(self)
            for v in [getattr(self, f.name)]
        }

    @classmethod
    def from_dict(cls, d: dict) -> TaskSpec:
        """The inverse of `to_dict`; KeyError names a missing field."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        values = {}
        for name, f in fields.items():
            if name not in d:
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                    raise KeyError(name)
                continue
            value = d[name]
            values[name] = tuple(str(v) for v in value) if isinstance(value, list) else value
        return cls(**values)

    @classmethod
    def from_config(cls, cfg: DictConfig) -> TaskSpec:
        check_task_node(cfg)
        c = OmegaConf.to_container(cfg, resolve=False)

        def tup(key):
            value = c.get(key)
            return None if value is None else tuple(str(v) for v in value)

        return cls(
            name=str(c["name"]),
            kind=str(c["kind"]),
            labels=tup("labels"),
            metrics=tup("metrics"),
            main_metric=str(c["main_metric"]),
            glue_metrics=tup("glue_metrics") or (),
            label_names=tup("label_names"),
            eval_metric_suffix=dict(c.get("eval_metric_suffix") or {}),
            submission_files=dict(c.get("submission_files") or {}),
            max_train_samples=c.get("max_train_samples"),
            max_eval_samples=c.get("max_eval_samples"),
            max_length=int(c.get("max_length") or 128),
            prompt=_prompt(c.get("prompt")),
            **{
                k: c[k]
                for k in ("doc_stride", "max_answer_length", "n_best_size", "no_answer_threshold", "choice_scoring")
                if c.get(k) is not None
            },
            **(_generation_fields(c) if str(c["kind"]) == "generation" else {}),
        )


def _generation_fields(c: dict) -> dict:
    from ptmlab.contracts.decoding import DecodingSettings

    return {
        "max_target_length": int(c.get("max_target_length", 128)),
        "source_prefix": c.get("source_prefix"),
        "label_smoothing": float(c.get("label_smoothing") or 0.0),
        "generation": DecodingSettings.from_dict(c.get("generation")).to_dict(),
    }


def _prompt(node: dict | None) -> dict | None:
    from lightning_modules.tasks.templates import (
        normalize_verbalizer,  # deferred: templates brings torch; a spec needs none
    )

    if node is None:
        return None
    return {"template": str(node["template"]), "verbalizer": normalize_verbalizer(node["verbalizer"])}


def check_task_node(cfg: DictConfig, key: str = "task") -> None:
    """The torch-free checks on a task node (also run at compose time by ptmlab.contracts.task_checks)."""
    from ptmlab.contracts.task_checks import check_task_node as check

    check(cfg, key)


@dataclass
class LoadedTask:
    """The spec plus every split with labels mapped: class index (int) or score (float)."""

    spec: TaskSpec
    data: TaskData

    @property
    def num_labels(self) -> int:
        return self.spec.num_labels

    @property
    def train(self) -> Split:
        return self.data.train

    @property
    def eval_splits(self) -> list[Split]:
        return [self.data.splits[s] for s in self.data.eval_splits]

    @property
    def test_splits(self) -> list[Split]:
        return [self.data.splits[s] for s in self.data.test_splits]


def load_task(task_cfg: DictConfig) -> LoadedTask:
    """Read the task's data (`task.data` is a reader `_target_` node) and check every label.

    Raises DataError naming the file and row for a label outside the label set, an empty split
    or a missing file; ConfigError naming the key for a bad spec."""
    from hydra.utils import instantiate

    if task_cfg is None:
        raise ConfigError("no task selected: add task=<group/name>, e.g. task=glue/sst2")
    spec = TaskSpec.from_config(task_cfg)
    reader = instantiate(task_cfg.data)
    data: TaskData = reader.read()
    for note in data.notes:
        log.warning(note)
    if spec.kind not in ("regression", "generation", "span_extraction", "multiple_choice") and spec.labels is None:
        labels = infer_tags(data.train) if spec.is_token_level else infer_labels(data.train)
        spec = dataclasses.replace(spec, labels=labels)
        declared = task_cfg.get("num_labels")
        if declared is not None and int(declared) != len(spec.labels):
            raise ConfigError(
                f"task.num_labels={declared} but the train split {data.train.source} has "
                f"{len(spec.labels)} labels: {', '.join(spec.labels)}"
            )
    limits = {data.train_split: spec.max_train_samples, **{s: spec.max_eval_samples for s in data.eval_splits}}
    splits = {}
    for name, split in data.splits.items():
        limit = limits.get(name)
        examples = split.examples if limit is None else split.examples[: int(limit)]
        if not examples:
            why = (
                f" after task.max_{'train' if name == data.train_split else 'eval'}_samples={limit}"
                if limit is not None and split.examples
                else ""
            )
            raise DataError(f"{split.source}: split '{name}' of task {spec.name} is empty{why}")
        if split.has_labels and not spec.is_generation:  # generation: the references are the labels
            label = _map_tags if spec.is_token_level else _map_label
            # span answers are checked against their context, choice indices against the row's choices, by the reader
            if not (spec.is_span_level or spec.is_multiple_choice):
                examples = [label(spec, split, ex) for ex in examples]
        splits[name] = dataclasses.replace(split, examples=examples)
    return LoadedTask(spec=spec, data=dataclasses.replace(data, splits=splits))


def infer_labels(split: Split) -> tuple[str, ...]:
    """Label set of a classification task without `task.labels`: the train split's values,
    sorted numerically when they are all integers, else alphabetically."""
    values = {str(ex.label) for ex in split.examples if ex.label is not None}
    if not values:
        raise DataError(f"{split.source}: no labels to infer the label set from (set task.labels)")
    try:
        return tuple(sorted(values, key=int))
    except ValueError:
        return tuple(sorted(values))


def infer_tags(split: Split) -> tuple[str, ...]:
    """Tag set of a token-classification task without `task.labels`: every tag of the train
    split, O first, then by entity type, B- before I- (data/tagged.py sort_tags). A BIO tag set
    gets both B-X and I-X for every type X seen (a one-word-entity type has no I-X in train, and
    dev may still hold one)."""
    tags = {str(t) for ex in split.examples for t in (ex.label or ())}
    if not tags:
        raise DataError(f"{split.source}: no tags to infer the tag set from (set task.labels)")
    if all(is_bio(t) for t in tags):
        tags |= {f"{p}-{t[2:]}" for t in tags if t != "O" for p in "BI"}
    return sort_tags(tags)


def _map_tags(spec: TaskSpec, split: Split, ex: TaggedSentence) -> TaggedSentence:
    index = {label: i for i, label in enumerate(spec.labels)}
    try:
        return dataclasses.replace(ex, label=tuple(index[str(t)] for t in ex.label))
    except KeyError:
        i = next(i for i, t in enumerate(ex.label) if str(t) not in index)
        raise DataError(
            f"{split.source}: line {ex.lines[i]}: tag '{ex.label[i]}' is not in the tag set of task "
            f"{spec.name} (task.labels: {', '.join(spec.labels)})"
        ) from None


def _map_label(spec: TaskSpec, split: Split, ex: TextExample) -> TextExample:
    raw = ex.label
    where = f"{split.source}: line {ex.row}" if not split.source.startswith("hf:") else f"{split.source}: row {ex.row}"
    if spec.is_regression:
        try:
            return dataclasses.replace(ex, label=float(raw))
        except (TypeError, ValueError):
            raise DataError(f"{where}: score '{raw}' is not a number (task {spec.name} is a regression task)") from None
    if isinstance(raw, int) and not isinstance(raw, bool):  # already a class index (HF datasets)
        if 0 <= raw < len(spec.labels):
            return dataclasses.replace(ex, label=raw)
        raise DataError(f"{where}: class index {raw} outside 0..{len(spec.labels) - 1} of task {spec.name}")
    try:
        return dataclasses.replace(ex, label=spec.labels.index(str(raw)))
    except ValueError:
        raise DataError(
            f"{where}: label '{raw}' is not in the label set of task {spec.name} "
            f"(task.labels: {', '.join(spec.labels)})"
        ) from None
