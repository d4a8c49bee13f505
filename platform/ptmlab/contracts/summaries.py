"""The typed contract of `summary.json`: what every stage writes and the platform reads.

Each stage constructs the model of its kind with its fields as keyword arguments (`build_summary`,
through `StageRun.summary`, which adds the fields every stage writes) and `StageRun.write_summary`
writes its `model_dump(mode="json")`, so a summary that breaks its contract, or holds a key its
model does not declare, fails the run that made it. The file crosses a process boundary: the
worker validates it once (`validate_summary`) and stores that model's `model_dump()` as the
`results` row, so a summary that does not validate fails the job with the field named instead of
leaving a broken dashboard row. Rows written before a field existed may lack it: the readers
(`read_stored_summary`, which `ptmlab.results` rows are read through, and the leaderboard's
`TaskRun`) allow for that. Torch-free: both halves import it. Extra fields of a stored row are
kept as extras (rows written before their keys were declared); a stage may not write one.
"""

from __future__ import annotations

import copy
import functools
import operator
import os
import types
import typing
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, create_model, model_validator

from ptmlab.contracts.errors import ConfigError

Number = float | int
# A metric is a number; NaN/inf are allowed (a diverged run must still be recorded and flagged).
Metrics = dict[str, Number | None]


def _path_text(value: Any) -> Any:
    return os.fspath(value) if isinstance(value, os.PathLike) else value


# A file or folder of the run: a stage hands its Path, the summary holds the text.
PathText = Annotated[str, BeforeValidator(_path_text)]


# The shape of a stored summary. Rows stored before summaries carried it are brought to it once,
# by the database migration 0008 (ptmlab.db.summary_migration), never patched up at each read.
SUMMARY_SCHEMA_VERSION = 2


class StageSummary(BaseModel):
    """Fields every stage writes (StageRun fills them)."""

    model_config = ConfigDict(extra="allow")

    schema_version: int = Field(SUMMARY_SCHEMA_VERSION, ge=1)
    stage: str
    mlflow_run_id: str | None = None
    run_dir: PathText | None = None
    seed: int
    wall_time_s: float = Field(ge=0)
    # The resolved config flattened (ptmlab.contracts.identity `config_params`): every key a run
    # can be grouped, filtered and compared by (`params` is pretrain's parameter count). None in
    # rows stored before runs recorded it.
    hparams: dict[str, str | int | float | bool | None] | None = None


class BackboneRecord(BaseModel):
    """What the backbone behind a run is: the model it came from (lightning_modules/artifacts/
    backbone_reference.py `backbone_summary`; for a stage that takes a task model, saved_task_model.py
    `record_source`), so a result names what ran, not the composed defaults. None in older rows."""

    family: str | None = None
    objective: str | None = None
    tokenizer: str | None = None
    backbone_source: str | None = None
    backbone: dict[str, Any] | None = None


class Throughput(BaseModel):
    """How fast a run trained (lightning_modules/runtime/throughput.py): tokens/s counts non-padding
    tokens, tokens/s and samples/s are for the whole job, MFU is per device (achieved model FLOPs/s
    ÷ the device's peak at the precision in use; None where the peak is unknown)."""

    model_config = ConfigDict(extra="allow")

    tokens_per_s: float | None = Field(None, ge=0)
    samples_per_s: float | None = Field(None, ge=0)
    mfu: float | None = Field(None, ge=0)
    data_wait_fraction: float | None = Field(None, ge=0, le=1)
    padding_fraction: float | None = Field(None, ge=0, le=1)
    peak_flops: float | None = Field(None, gt=0)  # one device's, FLOP/s
    device: str | None = None
    world_size: int = Field(1, ge=1)
    timed_steps: int = Field(0, ge=0)


class PretrainSummary(StageSummary):
    stage: Literal["pretrain"] = "pretrain"
    model: str
    family: str
    objective: str
    data: str
    steps: int = Field(ge=0)
    train_loss: float | None = None
    val_loss: float | None = None
    val_perplexity: float | None = None
    tokens_seen: int = Field(ge=0)
    train_flops: float = Field(ge=0)
    params: int = Field(ge=0)
    vocab_size: int = Field(ge=1)
    checkpoint: PathText
    export_dir: PathText
    throughput: Throughput | None = None
    replica_weights: list[str] | None = None  # a weights digest per DDP replica (all equal when in sync)


class PredictionStats(BaseModel):
    model_config = ConfigDict(extra="allow")


class GenerationNumbers(BaseModel):
    """A generation task's decoding (lightning_modules/stages/finetune.py `write_generation_files`):
    the settings, each metric's sacreBLEU signature or rouge-score setting, and the speed over
    every decoded split (generated sub-words, end tokens included)."""

    decoding: dict[str, Any]
    metric_signatures: dict[str, str]
    generated_tokens: int = Field(ge=0)
    tokens_per_s: float | None = Field(default=None, ge=0)
    latency_ms_per_example: float = Field(ge=0)


# A fine-tune's confusion report (the summary's `confusion`), under its run folder: the job page's
# prediction view reads it there (lightning_modules/tasks/confusion.py writes it).
CONFUSION_FILE = "predictions/confusion.json"


class Baseline(BaseModel):
    kind: Literal["majority_class"] = "majority_class"
    metric: str
    value: float


class FinetuneSummary(BackboneRecord, StageSummary):
    """stage=finetune, and stage=multitask (one head per task: `tasks`, `task_metrics`)."""

    stage: Literal["finetune", "multitask"] = "finetune"
    model: str
    adaptation: str
    task: str
    # task.kind (classification, token_classification, span_extraction, multiple_choice, generation ...):
    # what puts a task on the leaderboard's "tasks" or "generation" board whatever its name
    task_kind: str | None = None
    metrics: Metrics
    main_metric: str
    main_score: float | None = None
    prediction_stats: dict[str, Any] | None = None
    trainable_params: int = Field(ge=0)
    total_params: int = Field(ge=0)
    # What a task stores beside the shared backbone (lightning_modules/adaptation/base.py
    # `delta_state`): LoRA's pairs and the head, BitFit's biases, ... (finetune only).
    delta_params: int | None = Field(default=None, ge=0)
    delta_bytes: int | None = Field(default=None, ge=0)
    train_time_s: float = Field(ge=0)
    steps: int = Field(ge=0)
    task_model_dir: PathText | None = None
    throughput: Throughput | None = None
    generation: GenerationNumbers | None = None  # task.kind=generation only
    # The resolved config's hash (ptmlab.contracts.identity): with the seed, what tells a re-run
    # from a different configuration on the leaderboard.
    config_hash: str | None = None
    # The training set's majority class predicted for every eval row, scored with the main metric:
    # at or below it a run has learnt nothing (classification only).
    baseline: Baseline | None = None
    # Classification: the eval split's confusion matrix, per-class scores and the most confident
    # mistakes; token classification: the entity-level (BIO) or word-level confusion
    # (lightning_modules/tasks/confusion.py; CONFUSION_FILE in the run folder).
    confusion: dict[str, Any] | None = None
    defence: dict[str, Any] | None = None  # what it was trained against (adversarial training); None: plain
    metric_modes: dict[str, Any] | None = None  # how token and span metrics were computed (seqeval mode, ...)
    no_answer_threshold: float | None = None  # SQuAD v2.0: the threshold chosen on dev
    data_origin: dict[str, str] | None = None  # per split, where a reader drew or split it (few-shot, a split of dev)
    multiple_choice: dict[str, Any] | None = None  # how choices were scored
    data_notes: list[str] | None = None  # what the reader says of the data
    # the recipe it trained with and each of its values' origin (ptmlab.contracts.recipes.effective_recipe)
    recipe: dict[str, Any] | None = None
    warnings: list[str] | None = None  # unusual hyper-parameters (recipe_warnings): fewer than 100 steps ...
    # multitask only
    tasks: list[str] | None = None
    task_metrics: dict[str, Metrics] | None = None
    task_main_metrics: dict[str, str] | None = None  # each task's main metric key in task_metrics
    sampling: str | None = None
    temperature: float | None = None  # the sampler's p_t ∝ n_t^(1/T); None: T = ∞ (uniform)
    sampling_probabilities: dict[str, float] | None = None
    train_sizes: dict[str, int] | None = None  # training rows per task
    task_steps: dict[str, int] | None = None  # batches trained per task
    # each classification task's confusion report and majority-class baseline (its first eval split)
    task_confusion: dict[str, dict[str, Any]] | None = None
    task_baselines: dict[str, Baseline] | None = None


class MeasurementSettings(BaseModel):
    """How latency and size were measured, so two rows are comparable only when these match
    (lightning_modules/compression/measure.py writes them with every compress summary)."""

    model_config = ConfigDict(extra="allow")

    device: str = "cpu"
    threads: int | list[int] | None = None  # torch threads of each latency setting
    batch_size: int = Field(1, ge=1)
    batch_sizes: list[int] | None = None
    seq_len: int | None = Field(None, ge=1)
    warmup: int = Field(0, ge=0)
    repeats: int = Field(1, ge=1)
    dtype: str | None = None
    cpu: str | None = None  # CPU model name
    isa: list[str] | None = None  # avx2, avx512f, avx512_vnni, amx_int8 ... present
    quantized_engine: str | None = None  # torch.backends.quantized.engine (fbgemm, x86, qnnpack)


class LatencyPoint(BaseModel):
    """One latency setting of one model: the median of `repeats` timed runs."""

    model_config = ConfigDict(extra="allow")

    latency_ms: float = Field(ge=0)
    throughput: float | None = Field(None, ge=0)  # examples per second
    threads: int | None = Field(None, ge=1)
    batch_size: int | None = Field(None, ge=1)


class Measurement(BaseModel):
    """One model measured by the shared compression measurement (lightning_modules/compression/
    measure.py): the source and the compressed model alike, so every number of one has its twin in
    the other. Latencies are keyed `b<batch>_t<threads>`; `latency_ms` is the summary's headline one."""

    model_config = ConfigDict(extra="allow")

    score: float | None = None
    metrics: Metrics | None = None
    params: int | None = Field(None, ge=0)
    nonzero_params: int | None = Field(None, ge=0)
    size_bytes: int | None = Field(None, ge=0)
    non_embedding_size_bytes: int | None = Field(None, ge=0)
    flops: float | None = Field(None, ge=0)  # estimated forward FLOPs per example
    latency_ms: float | None = Field(None, ge=0)
    latency: dict[str, LatencyPoint] | None = None
    # task.kind=generation: the scored dev split's decoding (settings, signatures, tokens/s, latency
    # per example); `latency` then times generate()
    generation: GenerationNumbers | None = None


# What a compress summary held flat before `source` and `compressed` were measurements: the
# compressed model's numbers at the top level, the source's as `source_<name>`, and the
# reference it compressed as `source` (now `source_ref`).
MEASUREMENT_KEYS = tuple(Measurement.model_fields)


def lift_flat_measurements(data: Any) -> Any:
    """A compress summary in the earlier flat shape (rows already stored) lifted into `compressed`
    and `source` measurements; a summary already in the new shape is returned as it is."""
    if not isinstance(data, dict) or "compressed" in data:
        return data
    data = dict(data)
    if "source" in data and not isinstance(data["source"], dict):
        data.setdefault("source_ref", data.pop("source"))
    source = {k: data.pop(f"source_{k}") for k in MEASUREMENT_KEYS if f"source_{k}" in data}
    data["compressed"] = {k: data.pop(k) for k in MEASUREMENT_KEYS if k in data}
    if any(v is not None for v in source.values()):
        data["source"] = source
    return data


Ratios = dict[str, float | None]


class TrainingLoop(BaseModel):
    """One training loop of a compression method (recovery, qat, theseus, distill, control)."""

    model_config = ConfigDict(extra="allow")

    prefix: str
    epochs: int = Field(ge=0)
    lr: float | None = None
    steps: int = Field(ge=0)
    examples: int = Field(ge=0)
    examples_digest: str | None = None  # sha256 of the example indices in the order trained


class ExtraTraining(BaseModel):
    """The training a compressed model got beyond its source's (lightning_modules/compression/
    control.py): what makes its retention over the source more than compression alone."""

    model_config = ConfigDict(extra="allow")

    steps: int = Field(ge=0)
    examples: int = Field(ge=0)
    epochs: int = Field(ge=0)
    examples_digest: str | None = None
    train_time_s: float | None = Field(None, ge=0)
    loops: list[TrainingLoop] = Field(default_factory=list)
    data: dict[str, Any] = Field(default_factory=dict)  # task, split, rows, source


class CompressSummary(BackboneRecord, StageSummary):
    """stage=compress: the method, its settings, the `compressed` model and its `source` measured
    side by side (one `Measurement` each; `source_ref` is the reference it compressed). Latencies
    are keyed `b<batch>_t<threads>`; each measurement's `latency_ms` is the headline one
    (`headline_latency`, batch 32 on one thread when measured); ratios are compressed ÷ source,
    `speedup` source ÷ compressed, `retention` score ÷ source score. A method that trained after
    compressing records that `extra_training` and the score of its control (the source, or
    distillation's student, given the same training without compression; `retention_vs_control`
    = score ÷ control score), or, with the control switched off, `retention_with_extra_training`."""

    stage: Literal["compress"] = "compress"
    method: str
    model: str | None = None  # the source's model (saved_task_model.py `record_source`)
    config: dict[str, Any] = Field(default_factory=dict)  # the method's settings as run
    source_ref: str  # the reference it compressed (job:<id>, mlflow:<run>, folder)
    source_run: str | None = None  # the source's MLflow run id
    task: str
    main_metric: str | None = None
    compressed: Measurement
    source: Measurement | None = None  # None only in rows recorded without their source measured
    headline_latency: str | None = None
    retention: float | None = None
    size_ratio: float | None = Field(None, ge=0)
    non_embedding_size_ratio: float | None = Field(None, ge=0)
    param_ratio: float | None = Field(None, ge=0)
    flops_ratio: float | None = Field(None, ge=0)
    latency_ratio: Ratios | None = None
    speedup: Ratios | None = None
    control_score: float | None = None  # the same extra training without compression (distill: without the teacher)
    control_metrics: Metrics | None = None
    control_training: ExtraTraining | None = None  # what the control trained (the same examples and steps)
    extra_training: ExtraTraining | None = None  # what the compressed model trained beyond its source
    retention_vs_control: float | None = None  # score ÷ control_score
    control_retention: float | None = None  # control_score ÷ source.score: the extra training alone
    retention_with_extra_training: bool = False  # no control: retention mixes compression and extra training
    measurement: MeasurementSettings | None = None
    task_model_dir: PathText | None = None
    source_dir: PathText | None = None  # the source's task model folder
    edits: list[str | None] | None = None  # the operations the saved model's manifest records, oldest first
    # What the method reports of itself (lightning_modules/compression/<method>.py `Compressed.numbers`)
    train_time_s: float | None = Field(None, ge=0)
    recovery_steps: int | None = Field(None, ge=0)  # fine-tuning after the edit
    dtype: str | None = None  # cast_half
    student_layers: int | None = Field(None, ge=0)  # distill
    student_hidden_size: int | None = Field(None, ge=1)
    student_decoder_layers: int | None = Field(None, ge=0)
    layer_map: list[list[int]] | None = None  # [[student layer, teacher layer], ...]
    distill_steps: int | None = Field(None, ge=0)
    sequence_level_targets: int | None = Field(None, ge=0)  # sequence-level distillation's outputs
    sequence_level_changed_targets: int | None = Field(None, ge=0)  # of them, not the first reference
    kept_layers: list[int] | None = None  # drop_layers (an encoder–decoder: the encoder's)
    kept_decoder_layers: list[int] | None = None
    factored_layers: int | None = Field(None, ge=0)  # low_rank
    factored_weight_ratio: float | None = Field(None, ge=0)
    ranks: list[int] | None = None
    heads_before: int | None = Field(None, ge=0)  # prune_heads
    heads_after: int | None = Field(None, ge=0)
    heads_per_layer: list[int] | None = None
    pruned_heads: list[list[int]] | None = None  # per layer, the original indices of the removed heads
    target_sparsity: float | None = Field(None, ge=0, le=1)  # prune_magnitude
    sparsity: float | None = Field(None, ge=0, le=1)
    pruned_weights: int | None = Field(None, ge=0)
    zero_weights: int | None = Field(None, ge=0)
    storage: str | None = None
    successor_layers: int | None = Field(None, ge=0)  # theseus
    replacing_steps: int | None = Field(None, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _lift_flat(cls, data: Any) -> Any:
        """Rows the worker stored before the measurements were nested read as the new shape."""
        return lift_flat_measurements(data)


class ProbeLayer(BaseModel):
    """One layer's probe scores (layer 0 = the embedding layer)."""

    model_config = ConfigDict(extra="allow")

    layer: int = Field(ge=0)
    accuracy: float | None = None
    control_accuracy: float | None = None  # the Hewitt & Liang control task, same probe capacity
    selectivity: float | None = None  # accuracy - control_accuracy
    # structural probes
    uuas: float | None = None  # distance probe
    spearman: float | None = None  # distance Spearman (distance) / norm Spearman (depth)
    root_accuracy: float | None = None  # depth probe
    # representation geometry (Ethayarajh 2019): cosine similarities, "_adjusted" less the anisotropy
    anisotropy: float | None = None
    self_similarity: float | None = None
    self_similarity_adjusted: float | None = None
    intra_sentence_similarity: float | None = None
    intra_sentence_similarity_adjusted: float | None = None


# What a probe reports per layer: the probing view's curves and the drift view's metrics.
PROBE_LAYER_METRICS = tuple(name for name in ProbeLayer.model_fields if name != "layer")


class AttentionStatistic(BaseModel):
    model_config = ConfigDict(extra="allow")

    statistic: str  # entropy | cls | sep | punct | prev | next | dep:<relation>
    values: list[list[float | None]]  # [layer][head]


class ScalarMixScore(BaseModel):
    """A probe over a learned softmax-weighted mix of all layers."""

    model_config = ConfigDict(extra="allow")

    accuracy: float | None = None
    control_accuracy: float | None = None
    selectivity: float | None = None
    weights: list[float] = Field(default_factory=list)  # per layer, embeddings first


class RandomInitScores(BaseModel):
    """The same probe on the same architecture randomly initialised (a baseline of every run)."""

    model_config = ConfigDict(extra="allow")

    layers: list[ProbeLayer] = Field(default_factory=list)
    best_layer: int | None = None
    best_score: float | None = None
    scalar_mix: ScalarMixScore | None = None


class ClozeRelation(BaseModel):
    """LAMA scores of one relation over its single-token objects; `oov` objects are excluded."""

    model_config = ConfigDict(extra="allow")

    relation: str
    facts: int = Field(ge=0)
    oov: int = Field(ge=0)
    scored: int = Field(ge=0)
    p_at_1: float | None = None
    p_at_10: float | None = None
    mrr: float | None = None


class ProbeTaskResult(BaseModel):
    """One task of a suite: per-layer scores, the scalar mix, baselines (layer 0, random init,
    majority class), and what only some families have (cloze relations, attention heads)."""

    model_config = ConfigDict(extra="allow")

    probe_task: str
    family: Literal["token", "structural", "sentence", "attention", "geometry", "cloze"]
    metric: str | None = None  # the per-layer key the best layer is chosen by
    probe: str | None = None  # linear | mlp | rank<k>
    layers: list[ProbeLayer] = Field(default_factory=list)
    best_layer: int | None = None
    best_score: float | None = None
    best_selectivity: float | None = None
    scalar_mix: ScalarMixScore | None = None
    random_init: RandomInitScores | None = None
    baselines: dict[str, float | None] = Field(default_factory=dict)  # layer0, random_init_best, majority, ...
    relations: list[ClozeRelation] | None = None
    oov: int | None = Field(None, ge=0)
    heatmaps: list[AttentionStatistic] | None = None
    word_types: int | None = Field(None, ge=0)  # self-similarity: the word types seen in enough sentences


class ProbeSummary(BackboneRecord, StageSummary):
    """stage=probe: a suite of probe tasks on one model. `probe_task` names the suite and
    `layers`/`baselines` repeat its first task (the headline); `tasks` holds every task."""

    stage: Literal["probe"] = "probe"
    model: str
    probe_task: str
    suite: str | None = None
    alignment: str | None = None  # first | last | mean subword
    metric: str | None = None
    layers: list[ProbeLayer] = Field(default_factory=list)
    baselines: dict[str, float | None] = Field(default_factory=dict)  # majority, random-init, ...
    attention_heads: AttentionStatistic | list[AttentionStatistic] | None = None
    tasks: list[ProbeTaskResult] = Field(default_factory=list)
    train_sentences: int | None = Field(None, ge=0)
    eval_sentences: int | None = Field(None, ge=0)
    # per model label: forward passes run, cache hits, {dataset: {key, sentences, cache_hit, bytes}}
    extraction: dict[str, Any] = Field(default_factory=dict)
    probe_time_s: float | None = Field(None, ge=0)


class AttackCounts(BaseModel):
    succeeded: int = Field(ge=0)
    failed: int = Field(ge=0)
    skipped: int = Field(ge=0)  # misclassified before any attack


class TriggerStep(BaseModel):
    """One iteration of the universal-trigger search: the trigger after it, the loss it raised the
    gold labels' cross-entropy to, and the sample's accuracy with it inserted."""

    iteration: int = Field(ge=0)
    trigger: str
    loss: float
    accuracy: float = Field(ge=0, le=1)


class TriggerSearch(BaseModel):
    examples: int = Field(ge=0)  # the correctly classified examples it searched on
    queries: int = Field(ge=0)  # forward passes the search spent
    iterations: int = Field(ge=0)
    history: list[TriggerStep] = Field(default_factory=list)


ATTACK_RECORDS_FILE = "attack/records.jsonl"  # an attack run's per-example records, under its run folder


class AttackSummary(BackboneRecord, StageSummary):
    """stage=attack: the numbers attack papers report (TextAttack's definitions). Accuracies are
    over the `num_examples` sampled; `success_rate` over those classified correctly before the
    attack; `perturbed_word_ratio` (mean) over the successful attacks; `queries` (mean per example)
    over the attacked ones; the per-example records are in `records_file`
    (`<run_dir>/ATTACK_RECORDS_FILE`). `trigger*` only for a universal recipe (attack=triggers)."""

    stage: Literal["attack"] = "attack"
    recipe: str
    source: str
    task: str
    split: str | None = None
    model: str | None = None
    source_run: str | None = None  # the source's MLflow run
    source_dir: PathText | None = None
    source_adaptation: str | None = None  # how the source was adapted (full, lora, ...)
    source_defence: dict[str, Any] | None = None  # its defence's settings (freelb, augment), if any
    attacked_text: Literal["only", "second"] | None = None  # a pair task attacks its second text
    label: str | None = None  # `attack.label`: only examples of this gold class were sampled
    class_labels: list[str] | None = None  # the task's labels in class-index order (records hold indices)
    trigger: str | None = None
    trigger_tokens: list[int] | None = None  # its token ids in the source's vocabulary
    trigger_search: TriggerSearch | None = None
    num_examples: int = Field(ge=1)
    constraints: dict[str, Any]
    clean_accuracy: float = Field(ge=0, le=1)
    accuracy_under_attack: float = Field(ge=0, le=1)
    success_rate: float | None = Field(None, ge=0, le=1)
    perturbed_word_ratio: float | None = Field(None, ge=0, le=1)
    queries: float | None = Field(None, ge=0)
    seconds_per_example: float = Field(ge=0)
    counts: AttackCounts | None = None
    records_file: PathText | None = None


class SleepSummary(StageSummary):
    """stage=sleep, the torch-free stage of the platform's tests and demos."""

    stage: Literal["sleep"] = "sleep"
    seconds: float = Field(ge=0)
    resumed_from_s: float | None = None
    job_id: str | None = None
    cuda_visible_devices: str | None = None
    # `stage.size_bytes` set: a made-up compression trade-off (score = stage.quality) for the
    # multi-objective study tests, read as a compress summary's fields are.
    score: float | None = None
    size_bytes: int | None = Field(None, ge=0)


SUMMARY_BY_KIND: dict[str, type[StageSummary]] = {
    "pretrain": PretrainSummary,
    "finetune": FinetuneSummary,
    "multitask": FinetuneSummary,
    "compress": CompressSummary,
    "probe": ProbeSummary,
    "attack": AttackSummary,
    "sleep": SleepSummary,
}


def _first_error(exc: ValidationError) -> str:
    """The first value that breaks a contract, named by its path."""
    first = exc.errors()[0]
    where = ".".join(str(x) for x in first.get("loc", ())) or "summary"
    return f"{where}: {first.get('msg', 'invalid')} (got {first.get('input')!r:.80})"


Summary = TypeVar("Summary", bound=StageSummary)


def build_summary(model: type[Summary], /, **fields: Any) -> Summary:
    """A stage's summary, constructed from its fields (the model's own validation: a path becomes
    its text). ConfigError naming the first field that breaks the contract, or the keys `model`
    does not declare: what a stage writes is declared, extras are only tolerated in stored rows."""
    try:
        summary = model(**fields)
    except ValidationError as exc:
        raise ConfigError(f"summary.json ({fields.get('stage')}): {_first_error(exc)}") from None
    if summary.model_extra:
        raise ConfigError(
            f"summary.json ({summary.stage}): {', '.join(sorted(summary.model_extra))}: "
            f"not declared by {model.__name__}"
        )
    return summary


def validate_summary(data: Any) -> StageSummary:
    """The typed summary for `data` (a parsed summary.json); ConfigError naming the field if not."""
    if not isinstance(data, dict):
        raise ConfigError(f"summary.json must be a JSON object, not {type(data).__name__}")
    kind = data.get("stage")
    model = SUMMARY_BY_KIND.get(str(kind))
    if model is None:
        raise ConfigError(
            f"summary.json: stage={kind!r} has no summary contract (known: {', '.join(sorted(SUMMARY_BY_KIND))})"
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"summary.json ({kind}): {_first_error(exc)}") from None


def measured_on_top(summary: dict[str, Any]) -> dict[str, Any]:
    """A compress summary with its compressed model's numbers as its own top-level keys (score,
    params, ...), where the generic tables (runs, overview) look for a row's numbers and where rows
    stored flat had them; the source's stay `source.*`. Any other summary as it is."""
    measured = summary.get("compressed")
    if not isinstance(measured, dict):
        return summary
    return {**measured, **{k: v for k, v in summary.items() if k != "compressed"}}


@functools.cache
def stored_model(model: type[BaseModel]) -> type[BaseModel]:
    """`model` as a stored results row is read: its required fields optional (a row written before
    a field was required still loads, with the field None), in its nested models too (a probe
    task's `family`, a layer's `layer`), every other field as declared."""
    fields = {}
    for name, field in model.model_fields.items():
        annotation = _stored_annotation(field.annotation)
        if field.is_required():
            fields[name] = (annotation | None, None)
        elif annotation is not field.annotation:
            fields[name] = (annotation, field)
    return create_model(f"Stored{model.__name__}", __base__=model, **fields)


def _stored_annotation(annotation: Any) -> Any:
    """`annotation` with every contract model in it (in a list, a dict's values, a union) read as
    its `stored_model`; the same object when it holds none."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return stored_model(annotation)
    args = typing.get_args(annotation)
    stored = tuple(_stored_annotation(a) for a in args)
    if all(a is b for a, b in zip(args, stored, strict=True)):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return functools.reduce(operator.or_, stored)
    return origin[stored]


def read_stored_summary(data: Any) -> StageSummary | None:
    """A results row's summary as its kind's model (`stored_model`; a kind with no contract, a
    result recorded by hand, as a `StageSummary` with its own fields as extras); None when it is
    not a JSON object or a field has the wrong type, which `stored_summary_error` refuses at write
    and migration 0008 removed from the rows stored before."""
    if not isinstance(data, dict):
        return None
    try:
        return stored_model(SUMMARY_BY_KIND.get(str(data.get("stage")), StageSummary)).model_validate(data)
    except ValidationError:
        return None


def stored_summary_error(data: dict[str, Any]) -> str | None:
    """Why `data` cannot be stored as a results row (the first value of the wrong type, named by
    its path), or None. A field required of a stage's own summary may be missing (a result
    recorded by hand), a value of the wrong type may not: no reader would see that row."""
    model = stored_model(SUMMARY_BY_KIND.get(str(data.get("stage")), StageSummary))
    try:
        model.model_validate(data)
    except ValidationError as exc:
        return _first_error(exc)
    return None


def salvaged_summary(data: Any, max_drops: int = 50) -> StageSummary | None:
    """What of a row `read_stored_summary` rejects still reads: each value of the wrong type
    dropped (a field then takes its default, a list loses the entry) until the rest validates, as
    the views skipped what they could not read before they read models. Migration 0008 applies it
    once to the rows stored before summaries had a schema version. A kind with no contract (a
    result recorded by hand) reads as a `StageSummary`, its own fields as extras. None for a row
    that is not a JSON object, or when nothing validates after `max_drops` drops."""
    if not isinstance(data, dict):
        return None
    model = SUMMARY_BY_KIND.get(str(data.get("stage")), StageSummary)
    for drops in range(max_drops):
        try:
            return stored_model(model).model_validate(data)
        except ValidationError as exc:
            data = data if drops else copy.deepcopy(data)  # the caller's row stays as stored
            if not _drop(data, exc.errors()[0]["loc"]):
                return None
    return None


def _drop(data: Any, loc: tuple) -> bool:
    """Remove the value at `loc` (a validation error's location) from `data`; False where there is
    none to remove. A union's error names its member (a model name) after the value's position."""
    parent, key = None, None
    node = data
    for part in loc:
        if isinstance(node, dict) and part in node:
            parent, key, node = node, part, node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            parent, key, node = node, part, node[part]
        elif parent is None:
            return False
        else:
            break  # a union member's name, or a field that is missing: drop what holds it
    if parent is None:
        return False
    del parent[key]
    return True
