"""The typed contract of `summary.json`: what every stage writes and the platform reads.

A stage builds one of these models and hands it to `StageRun.write_summary`; the worker validates
the file against the model named by its `stage` (the *kind*) before it becomes a `results` row,
so a summary that does not validate fails the job with the field named instead of leaving a
broken dashboard row; the dashboard views read rows through the same models. Torch-free: both
halves import it. Unknown extra fields are kept (a stage may record more than the dashboard
reads); the declared ones are typed.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ptmlab.contracts.errors import ConfigError

Number = float | int
# A metric is a number; NaN/inf are allowed (a diverged run must still be recorded and flagged).
Metrics = dict[str, Number | None]


class StageSummary(BaseModel):
    """Fields every stage writes (StageRun fills them)."""

    model_config = ConfigDict(extra="allow")

    stage: str
    mlflow_run_id: str | None = None
    run_dir: str | None = None
    seed: int
    wall_time_s: float = Field(ge=0)


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
    checkpoint: str
    export_dir: str


class PredictionStats(BaseModel):
    model_config = ConfigDict(extra="allow")


class FinetuneSummary(StageSummary):
    """stage=finetune, and stage=multitask (one head per task: `tasks`, `task_metrics`)."""

    stage: Literal["finetune", "multitask"] = "finetune"
    model: str
    objective: str | None = None
    adaptation: str
    task: str
    backbone_source: str | None = None
    metrics: Metrics
    main_metric: str
    main_score: float | None = None
    prediction_stats: dict[str, Any] | None = None
    trainable_params: int = Field(ge=0)
    total_params: int = Field(ge=0)
    train_time_s: float = Field(ge=0)
    steps: int = Field(ge=0)
    task_model_dir: str | None = None
    # multitask only
    tasks: list[str] | None = None
    task_metrics: dict[str, Metrics] | None = None
    sampling: str | None = None


class Measurement(BaseModel):
    """One model measured by the shared compression measurement (the source and the result alike)."""

    model_config = ConfigDict(extra="allow")

    score: float | None = None
    params: int = Field(ge=0)
    nonzero_params: int | None = Field(None, ge=0)
    size_bytes: int = Field(ge=0)
    latency_ms: float | None = Field(None, ge=0)
    flops: float | None = Field(None, ge=0)


class MeasurementSettings(BaseModel):
    """How latency and size were measured, so two rows are comparable only when these match."""

    model_config = ConfigDict(extra="allow")

    device: str = "cpu"
    threads: int | None = None
    batch_size: int = Field(1, ge=1)
    seq_len: int | None = Field(None, ge=1)
    warmup: int = Field(0, ge=0)
    repeats: int = Field(1, ge=1)
    dtype: str | None = None


class CompressSummary(StageSummary):
    """stage=compress: the method, its settings, the compressed model and its source measured side by side."""

    stage: Literal["compress"] = "compress"
    method: str
    config: dict[str, Any] = Field(default_factory=dict)  # the method's settings as run
    source: str                     # the reference it compressed (job:<id>, mlflow:<run>, folder)
    source_run: str | None = None   # the source's MLflow run id
    task: str
    main_metric: str | None = None
    score: float | None = None
    params: int = Field(ge=0)
    nonzero_params: int | None = Field(None, ge=0)
    size_bytes: int = Field(ge=0)
    latency_ms: float | None = Field(None, ge=0)
    source_score: float | None = None
    source_params: int | None = Field(None, ge=0)
    source_nonzero_params: int | None = Field(None, ge=0)
    source_size_bytes: int | None = Field(None, ge=0)
    source_latency_ms: float | None = Field(None, ge=0)
    measurement: MeasurementSettings | None = None
    task_model_dir: str | None = None


class ProbeLayer(BaseModel):
    """One layer's probe scores (layer 0 = the embedding layer)."""

    model_config = ConfigDict(extra="allow")

    layer: int = Field(ge=0)
    accuracy: float | None = None
    control_accuracy: float | None = None
    selectivity: float | None = None
    # structural probes
    uuas: float | None = None
    spearman: float | None = None


class AttentionStatistic(BaseModel):
    model_config = ConfigDict(extra="allow")

    statistic: str
    values: list[list[float | None]]  # [layer][head]


class ProbeSummary(StageSummary):
    """stage=probe: per-layer scores of one probe task, control-task selectivity, baselines."""

    stage: Literal["probe"] = "probe"
    model: str
    probe_task: str
    backbone_source: str | None = None
    alignment: str | None = None           # first | last | mean subword
    metric: str | None = None
    layers: list[ProbeLayer] = Field(default_factory=list)
    baselines: dict[str, float | None] = Field(default_factory=dict)  # majority, random-init, ...
    attention_heads: AttentionStatistic | list[AttentionStatistic] | None = None


class SleepSummary(StageSummary):
    """stage=sleep, the torch-free stage of the platform's tests and demos."""

    stage: Literal["sleep"] = "sleep"
    seconds: float = Field(ge=0)
    resumed_from_s: float | None = None
    job_id: str | None = None
    cuda_visible_devices: str | None = None


SUMMARY_BY_KIND: dict[str, type[StageSummary]] = {
    "pretrain": PretrainSummary,
    "finetune": FinetuneSummary,
    "multitask": FinetuneSummary,
    "compress": CompressSummary,
    "probe": ProbeSummary,
    "sleep": SleepSummary,
}


def validate_summary(data: Any) -> StageSummary:
    """The typed summary for `data` (a parsed summary.json); ConfigError naming the field if not."""
    if not isinstance(data, dict):
        raise ConfigError(f"summary.json must be a JSON object, not {type(data).__name__}")
    kind = data.get("stage")
    model = SUMMARY_BY_KIND.get(str(kind))
    if model is None:
        raise ConfigError(f"summary.json: stage={kind!r} has no summary contract "
                          f"(known: {', '.join(sorted(SUMMARY_BY_KIND))})")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first.get("loc", ())) or "summary"
        raise ConfigError(f"summary.json ({kind}): {where}: {first.get('msg', 'invalid')} "
                          f"(got {first.get('input')!r:.80})") from None
