"""Task metrics of a model on a split: the one way every stage computes them.

    evaluate(model, task, "dev", tokenizer=tok)    {"accuracy": 0.91}: the task's GLUE metrics, keyed
                                                   as summary.json `metrics` (MNLI's dev_mismatched
                                                   gives accuracy_mm)
    evaluate(loaded, task, "dev")                  the same for a `load_task_model(...)` result
                                                   (it carries its tokenizer)
    predict(model, task, "dev", tokenizer=tok)     N×C logits in split order (float32, CPU); token
                                                   classification: N×L×C, L = task.max_length;
                                                   span extraction: W×L×2 per context window;
                                                   multiple choice: N×C choice scores (-inf past
                                                   a row's choices)
    predict_answers(model, task, "dev", ...)       span extraction: each question's best span
                                                   (tasks/span_answers.py SpanAnswer), split order

`model` is a `PooledEncoder` (heads' TaskModel or MultiTaskModel): the head of
`task.spec.name` is read. `task` is a `LoadedTask` (tasks.spec.load_task). The Lightning
validation loops of finetune and multitask gather predictions themselves (devices, DDP) and
score them with `split_metrics`, the same function `evaluate` ends in; `task_loss` is their
training loss.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F

from lightning_modules.heads.generation_model import decode_split
from lightning_modules.heads.pooling import PooledEncoder
from lightning_modules.tasks.answer_option_metrics import ANSWER_OPTION_METRICS, answer_option_metrics
from lightning_modules.tasks.choice_metrics import choice_metrics
from lightning_modules.tasks.encoding import longest_first
from lightning_modules.tasks.generation_metrics import score_split
from lightning_modules.tasks.metrics import compute_metrics
from lightning_modules.tasks.span_answers import SpanAnswer, SpanWindows, best_spans, score_answers
from lightning_modules.tasks.spec import LoadedTask, TaskSpec
from lightning_modules.tasks.tagged_predictions import first_subword_predictions, gold_tags, word_tags
from lightning_modules.tasks.token_encoding import IGNORE
from lightning_modules.tasks.token_metrics import token_metrics
from ptmlab.contracts import ConfigError, DataError

# Examples per forward pass when scoring; what is scored twice (compression/decoding_speed.py) uses the
# same, since int8 activations are quantized per batch.
EVAL_BATCH_SIZE = 128


def task_loss(spec: TaskSpec, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy on B×C logits (B×T×C per token, -100 labels ignored; multiple choice: the B×N
    choice scores, a softmax over choices), or MSE on a B×1 regression head. Generation: token-level
    cross-entropy on the B×T×V teacher-forced logits with the task's label smoothing."""
    if spec.is_generation:
        return F.cross_entropy(
            logits.float().flatten(0, 1), labels.flatten(), ignore_index=IGNORE, label_smoothing=spec.label_smoothing
        )  # B×T×V -> BT×V
    if spec.is_token_level:
        return F.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), ignore_index=IGNORE)  # B×T×C -> BT×C
    if spec.is_span_level:  # B×T×2 start/end logits, B×2 positions: Hugging Face's QA loss, the mean of the two
        start, end = logits.float().unbind(-1)  # B×T each
        return (F.cross_entropy(start, labels[:, 0]) + F.cross_entropy(end, labels[:, 1])) / 2
    if spec.is_regression:
        return F.mse_loss(logits.squeeze(-1).float(), labels.float())
    return F.cross_entropy(logits.float(), labels)


def prediction_scores(spec: TaskSpec, logits: torch.Tensor) -> torch.Tensor:
    """What the metrics read: B×C logits, or B scores for regression (detached, float32)."""
    logits = logits.detach().float()
    return logits.squeeze(-1) if spec.is_regression else logits


def split_metrics(task: LoadedTask, split: str, predictions, labels) -> dict[str, float]:
    """The task's metrics on one eval split, keyed by `spec.metric_key` (accuracy, accuracy_mm, ...).
    Token classification: `predictions` are N×L first-sub-word tag indices in split order
    (tasks/tagged_predictions.py), scored word by word against the split's full gold tags.
    Generation: `predictions` are the output texts in split order (tasks/generation_metrics.py)."""
    if task.spec.is_generation:
        return score_split(task, split, predictions)[0]
    if task.spec.is_span_level:  # `predictions`: every window's logits (tasks/span_answers.py SpanWindows)
        data = task.data.splits[split]
        values = score_answers(task.spec, data, best_spans(task.spec, data, predictions))
        return {task.spec.metric_key(name, split): float(value) for name, value in values.items()}
    if task.spec.is_multiple_choice:  # B×N choice scores; accuracy_norm for log-likelihood scores
        values = choice_metrics(task.spec, task.data.splits[split], predictions, labels)
        return {task.spec.metric_key(name, split): float(value) for name, value in values.items()}
    if task.spec.is_token_level:
        data = task.data.splits[split]
        values = token_metrics(task.spec.metrics, gold_tags(task.spec, data), word_tags(task.spec, data, predictions))
        return {task.spec.metric_key(name, split): float(value) for name, value in values.items()}
    # MultiRC: F1 over answer options, exact match over the questions they group into (the split's `group`s)
    per_option = [m for m in task.spec.metrics if m in ANSWER_OPTION_METRICS]
    values = compute_metrics(
        [m for m in task.spec.metrics if m not in per_option], predictions, labels, num_labels=task.num_labels
    )
    if per_option:
        groups = [ex.group for ex in task.data.splits[split].examples]
        values.update(answer_option_metrics(per_option, predictions, labels, groups))
    return {task.spec.metric_key(name, split): float(value) for name, value in values.items()}


def _model_and_tokenizer(model, tokenizer):
    inner = getattr(model, "model", None)
    if isinstance(inner, PooledEncoder):  # a LoadedTaskModel: its module and its own tokenizer
        return inner, tokenizer if tokenizer is not None else model.tokenizer
    if tokenizer is None:
        raise ConfigError("evaluate/predict need the model's tokenizer (tokenizer=...)")
    return model, tokenizer


def _encoded_batches(
    model, tokenizer, task: LoadedTask, split: str, batch_size: int
) -> tuple[torch.Tensor, Iterator[dict]]:
    """(order, batches): `split` encoded by the model's input encoder and collated `batch_size`
    examples at a time on the model's device, longest first (tasks/encoding.py `longest_first`);
    `order[k]` is the split index of the k-th example out, so `rows[order.argsort()]` puts
    per-example rows back in split order."""
    encoder = model.input_encoder(tokenizer, task.spec.max_length, doc_stride=task.spec.doc_stride)
    items = encoder.encode_split(task.data.splits[split])
    order = longest_first(items)
    device = next(model.parameters()).device

    def batches() -> Iterator[dict]:
        for start in range(0, len(order), int(batch_size)):
            chunk = [items[i] for i in order[start : start + int(batch_size)]]
            yield {k: v.to(device) for k, v in encoder.collate(chunk).items()}

    return torch.tensor(order, dtype=torch.long), batches()


@contextmanager
def _eval_mode(model):
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


@torch.no_grad()
def predict(model, task: LoadedTask, split: str, *, tokenizer=None, batch_size: int = EVAL_BATCH_SIZE) -> torch.Tensor:
    """Logits of the head of `task` for every example of `split`, in order, in eval mode."""
    model, tokenizer = _model_and_tokenizer(model, tokenizer)
    if split not in task.data.splits:
        raise DataError(f"task {task.spec.name} has no split '{split}' (splits: {', '.join(task.data.splits)})")
    outputs = []
    with _eval_mode(model):
        order, batches = _encoded_batches(model, tokenizer, task, split, batch_size)
        for batch in batches:
            logits = model.task_logits(task.spec.name, batch).float().cpu()
            if (
                task.spec.is_token_level or task.spec.is_span_level
            ):  # B×T×C, T per batch -> B×L×C (L = max_length, zero-padded)
                logits = F.pad(logits, (0, 0, 0, task.spec.max_length - logits.size(1)))
            outputs.append(logits)
    return torch.cat(outputs)[order.argsort()]


def evaluate(
    model, task: LoadedTask, split: str, *, tokenizer=None, batch_size: int = EVAL_BATCH_SIZE
) -> dict[str, float]:
    """The task's GLUE metrics of `model` on a labelled split (see the module docstring)."""
    data = task.data.splits.get(split)
    if data is not None and not data.has_labels:
        raise DataError(f"{data.source}: split '{split}' of task {task.spec.name} has no labels to score")
    if task.spec.is_token_level:
        return _evaluate_tokens(model, task, split, tokenizer=tokenizer, batch_size=batch_size)
    if task.spec.is_span_level:
        return split_metrics(task, split, _span_windows(model, task, split, tokenizer, batch_size), None)
    if task.spec.is_generation:  # decoded with the task's settings (task.generation)
        model, tokenizer = _model_and_tokenizer(model, tokenizer)
        return split_metrics(
            task, split, decode_split(model, tokenizer, task, split, batch_size=batch_size).outputs, None
        )
    logits = predict(model, task, split, tokenizer=tokenizer, batch_size=batch_size)
    labels = torch.tensor([ex.label for ex in data.examples])
    return split_metrics(task, split, prediction_scores(task.spec, logits), labels)


@torch.no_grad()
def _span_windows(model, task: LoadedTask, split: str, tokenizer, batch_size: int) -> SpanWindows:
    model, tokenizer = _model_and_tokenizer(model, tokenizer)
    with _eval_mode(model):
        order, batches = _encoded_batches(model, tokenizer, task, split, batch_size)
        windows = SpanWindows.cat(
            [
                SpanWindows.from_batch(model.task_logits(task.spec.name, batch), batch, task.spec.max_length)
                for batch in batches
            ]
        )
    back = order.argsort()  # windows in split order, as a question's windows were made
    return SpanWindows(windows.logits[back], windows.offsets[back], windows.example_index[back])


def predict_answers(
    model, task: LoadedTask, split: str, *, tokenizer=None, batch_size: int = EVAL_BATCH_SIZE
) -> list[SpanAnswer]:
    """Span extraction: each question's best span over its windows (before any no-answer threshold)."""
    return best_spans(task.spec, task.data.splits[split], _span_windows(model, task, split, tokenizer, batch_size))


@torch.no_grad()
def _evaluate_tokens(model, task: LoadedTask, split: str, *, tokenizer, batch_size: int) -> dict[str, float]:
    """`evaluate` for token classification: first-sub-word predictions need each batch's word starts."""
    model, tokenizer = _model_and_tokenizer(model, tokenizer)
    rows = []
    with _eval_mode(model):
        order, batches = _encoded_batches(model, tokenizer, task, split, batch_size)
        for batch in batches:
            rows.append(
                first_subword_predictions(model.task_logits(task.spec.name, batch), batch, task.spec.max_length)
            )
    return split_metrics(task, split, torch.cat(rows)[order.argsort()], None)
