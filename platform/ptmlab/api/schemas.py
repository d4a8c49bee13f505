"""Request and response bodies of the REST API (pydantic, apart from the ORM rows).

Bounds on numbers and lengths keep every accepted value storable on SQLite and PostgreSQL
(int4 ids, varchar lengths), so a bad value is a 422, never a database error.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ptmlab.queue.jobs import (
    INT4_MAX,
    Gpus,
    MaxAttempts,
    Name,
    Nodes,
    Priority,
    QueueName,
    Seed,
    Tags,
    TimeoutS,
    no_nul,
)

# `?adaptation=lora,bitfit` on the leaderboard endpoints; ptmlab.leaderboard.parse_adaptation_filter
# checks it (its 422 names the parameter, an empty value included).
ModeFilter = Annotated[str | None, Query(max_length=600, description="adaptation modes: lora,bitfit")]

Override = Annotated[str, Field(min_length=1, max_length=2000)]
JobId = Annotated[int, Field(ge=1, le=INT4_MAX)]
ShortText = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.\-]+$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _reject_nul(cls, value: Any) -> Any:
        return no_nul(value)


class JobOptions(_Strict):
    """A job's options, bounded as everywhere a job is described (ptmlab.queue.jobs: pipelines' jobs
    and studies' trials take the same types)."""

    queue: QueueName = "default"
    priority: Priority = 0
    gpus: Gpus = 0
    nodes: Nodes = 1
    timeout_s: TimeoutS | None = None
    max_attempts: MaxAttempts = 3
    tags: Tags = Field(default_factory=dict)


class JobSubmit(JobOptions):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"stage": "sleep", "overrides": ["stage.seconds=0.5"], "seed": 1, "tags": {"demo": "true"}},
                {"overrides": ["stage=pretrain", "model=bert_tiny", "objective=mlm"], "gpus": 1, "priority": 5},
            ]
        },
    )

    stage: ShortText | None = Field(None, description="default: `stage=` in overrides, else the config default")
    overrides: list[Override] = Field(
        default_factory=list, max_length=200, description="Hydra overrides, e.g. model=bert_tiny"
    )
    seed: Seed | None = None
    depends_on: list[JobId] = Field(default_factory=list, max_length=100)
    idempotency_key: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    name: Name | None = None


class RecipeValue(BaseModel):
    value: Any
    origin: str = Field(description="recipe:<name> | override | sweep")


class RecipeOut(BaseModel):
    """The recipe a job trains with (ptmlab.recipes): its name and each of its keys' value and origin."""

    name: str = Field(description="the recipe applied (none: the stage's defaults)")
    requested: str = Field(description="auto, or the recipe named by recipe=")
    values: dict[str, RecipeValue]


class JobLabels(_Strict):
    """PATCH /jobs/{id}: only the fields given change; a tag set to null is removed."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "name": "lr-1e-4",
                    "tags": {"idea": "warmup", "old": None},
                    "note": "diverged after epoch 2; rerun with clipping",
                }
            ]
        },
    )

    name: Name | None = None
    tags: dict[Annotated[str, Field(min_length=1, max_length=100)], Annotated[str, Field(max_length=500)] | None] = (
        Field(default_factory=dict, max_length=50)
    )
    note: Annotated[str, Field(max_length=10_000)] | None = None


class SweepSubmit(JobOptions):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"overrides": ["stage=sleep", "stage.seconds=0.1,0.2", "seed=range(0,3)"], "dry_run": True},
                {
                    "overrides": ["stage=pretrain", "model=bert_tiny,electra_tiny", "seed=range(0,3)"],
                    "name": "mlm-seeds",
                },
                {"jobs": [["stage=sleep", "seed=0"], ["stage=sleep", "seed=1"]], "name": "expanded"},
            ]
        },
    )

    overrides: list[Override] = Field(
        default_factory=list,
        max_length=200,
        description="comma lists, range(a,b) and choice(...) expand to the cross product",
    )
    jobs: list[Annotated[list[Override], Field(max_length=200)]] | None = Field(
        None,
        min_length=1,
        max_length=10_000,
        description="instead of `overrides`: the sweep already expanded, one override list per job "
        "(what the Hydra launcher `hydra/launcher=ptmlab` sends)",
    )
    name: Name | None = None
    dry_run: bool = Field(False, description="only expand and validate: return the count and the jobs' overrides")

    @model_validator(mode="after")
    def _one_source(self) -> SweepSubmit:
        if bool(self.overrides) == (self.jobs is not None):
            raise ValueError("give either `overrides` (a sweep to expand) or `jobs` (expanded), not both or neither")
        return self


class PipelineSubmit(_Strict):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"name": "sleep_graph", "dry_run": True},
                {
                    "spec": {
                        "name": "two",
                        "jobs": [{"name": "a", "stage": "sleep"}, {"name": "b", "stage": "sleep", "depends_on": ["a"]}],
                    }
                },
            ]
        },
    )

    name: ShortText | None = Field(None, description="a conf/pipeline/<name>.yaml")
    spec: dict[str, Any] | None = Field(None, description="an inline pipeline (same format as conf/pipeline)")
    overrides: list[Override] = Field(default_factory=list, max_length=200, description="applied to every job")
    tags: Tags = Field(default_factory=dict)
    dry_run: bool = False


class ProgressOut(BaseModel):
    """A running stage's latest progress (ptmlab.contracts.progress), as its worker last read it."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [
                {
                    "phase": "training",
                    "step": 120,
                    "total_steps": 250,
                    "epoch": 0,
                    "metrics": {"train/loss": 0.41},
                    "steps_per_s": 1.9,
                    "eta_s": 68.4,
                    "updated_at": 1795400445.1,
                }
            ]
        },
    )

    phase: str | None = None
    step: int | None = None
    total_steps: int | None = None
    epoch: int | None = None
    metrics: dict[str, float] = Field(default_factory=dict)
    steps_per_s: float | None = None
    eta_s: float | None = None
    updated_at: float | None = None


class ProgressSeriesOut(BaseModel):
    """One training of a job (ptmlab.contracts.progress.history_series): a distillation's student and
    its no-teacher control are two series, each drawn as its own labelled curve."""

    name: str  # the training's name as the stage wrote it (training, distill, control, recovery, qat ...)
    label: str  # as the page shows it
    points: list[dict[str, float]]


class ProgressHistoryOut(BaseModel):
    job_id: int
    status: str
    progress: ProgressOut | None
    # [{"step": s, "series": "training", "train/loss": ..., "val/acc": ...}], oldest first
    history: list[dict[str, float | str]]
    series: list[ProgressSeriesOut] = []  # the same points, one series per training (its steps start at its start)


class JobOut(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": 7,
                    "name": None,
                    "stage": "sleep",
                    "overrides": ["stage.seconds=0.5"],
                    "seed": 1,
                    "queue": "default",
                    "priority": 0,
                    "gpus": 0,
                    "nodes": 1,
                    "timeout_s": None,
                    "max_attempts": 3,
                    "idempotency_key": None,
                    "tags": {},
                    "status": "queued",
                    "cancel_requested": False,
                    "resume": False,
                    "attempts": 0,
                    "worker_id": None,
                    "exit_code": None,
                    "error": None,
                    "mlflow_run_id": None,
                    "run_dir": None,
                    "sweep_id": None,
                    "pipeline_id": None,
                    "depends_on": [],
                    "created_at": "2026-11-22T14:00:00Z",
                    "started_at": None,
                    "finished_at": None,
                    "lease_expires_at": None,
                }
            ]
        }
    )

    id: int
    name: str | None
    stage: str
    overrides: list[str]
    seed: int
    queue: str
    priority: int
    gpus: int
    nodes: int = 1
    progress: ProgressOut | None = None  # while running (and where a run stopped): no history here
    timeout_s: float | None
    max_attempts: int
    idempotency_key: str | None
    tags: dict[str, Any]
    note: str | None = None
    status: str
    cancel_requested: bool
    resume: bool
    attempts: int
    worker_id: str | None
    exit_code: int | None
    error: str | None
    mlflow_run_id: str | None
    run_dir: str | None
    sweep_id: str | None
    pipeline_id: str | None
    study_id: str | None = None  # a study's trial: the study and Optuna's trial number
    trial_number: int | None = None
    depends_on: list[int]
    created_at: str | None
    started_at: str | None
    finished_at: str | None
    lease_expires_at: str | None


class JobPage(BaseModel):
    total: int
    limit: int
    offset: int
    jobs: list[JobOut]


class AttemptOut(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": 3,
                    "job_id": 7,
                    "number": 1,
                    "worker_id": "host-123-ab12",
                    "status": "succeeded",
                    "gpu_ids": [],
                    "argv": ["stage=sleep", "seed=1"],
                    "log_path": "/home/me/.ptmlab/jobs/7/attempt-1.log",
                    "exit_code": 0,
                    "error": None,
                    "started_at": "2026-11-22T14:00:01Z",
                    "finished_at": "2026-11-22T14:00:02Z",
                }
            ]
        }
    )

    id: int
    job_id: int
    number: int
    worker_id: str
    status: str
    gpu_ids: list[int]
    argv: list[str]
    log_path: str | None
    exit_code: int | None
    error: str | None
    started_at: str | None
    finished_at: str | None


class LogOut(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"job_id": 7, "attempt": 1, "text": "sleeping 0.5 s\n", "offset": 15, "size": 15, "path": "/tmp/x.log"}
            ]
        }
    )

    job_id: int
    attempt: int | None
    text: str
    offset: int = Field(description="pass back as ?offset= to read what follows")
    size: int
    path: str | None


class MarkedWord(BaseModel):
    word: str
    changed: bool  # outside the word diff's matching blocks: substituted, or inserted (a trigger)


class AttackRecordOut(BaseModel):
    index: int  # the row in the attacked split
    id: str
    status: str  # succeeded | failed | skipped (misclassified before any attack)
    label: int  # gold class index (class_labels names it)
    prediction_before: int
    prediction_after: int | None
    queries: int
    context: str | None  # a pair's first text, held fixed
    original: list[MarkedWord]
    perturbed: list[MarkedWord] | None  # None: not attacked (skipped)


class AttackRecordsOut(BaseModel):
    """A page of an attack job's records of one status, from its records artifact."""

    job_id: int
    result_id: int
    recipe: str | None
    class_labels: list[str] | None
    trigger: str | None
    status: str
    total: int = Field(description="records with this status")
    counts: dict[str, int]  # records per status
    limit: int
    offset: int
    records: list[AttackRecordOut]


class PredictionSamplesOut(BaseModel):
    """A page of a fine-tune job's predictions of one split, from its predictions folder
    (ptmlab.views.prediction_samples): each example in its task kind's terms."""

    job_id: int
    result_id: int
    task: str
    kind: str = Field(
        description="generation | span_extraction | multiple_choice | token_classification | classification"
    )
    split: str | None = Field(description="null when the run kept no predictions file (see `missing`)")
    splits: list[str] = Field(description="the splits with a predictions file, evaluation splits first")
    errors_only: bool
    total: int = Field(description="examples of the split (with errors_only: the wrong ones)")
    limit: int
    offset: int
    examples: list[dict[str, Any]] = Field(
        description="generation: source, references, output; span_extraction: "
        "prediction, gold, matches_gold; multiple_choice: prediction, label, "
        "scores, correct; token_classification: words [{word, gold, predicted, "
        "error}], errors; classification: id, prediction, label, correct"
    )
    confusion: dict[str, Any] | None = Field(
        None,
        description="the run's confusion report (predictions/confusion.json), null where it wrote none: "
        "labels, matrix (rows gold, columns predicted), per_class [{label, precision, recall, f1, "
        "support}], misclassified (at most 20) [{index, text, gold, predicted, score}], errors, "
        "examples, level (class | word | entity); entity level: rows and columns are entity "
        "types and O (column O: missed, row O: spurious), with missed and spurious per type",
    )
    missing: str | None = Field(None, description="why there is no example: the run kept no predictions file")


class SweepOut(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "3f2a9c1b0d4e",
                    "name": None,
                    "dry_run": False,
                    "count": 6,
                    "jobs": [["stage=sleep", "seed=0"], ["stage=sleep", "seed=1"]],
                    "job_ids": [1, 2],
                }
            ]
        }
    )

    id: str | None
    name: str | None = None
    dry_run: bool
    count: int
    jobs: list[list[str]] = Field(description="each job's overrides after expansion")
    job_ids: list[int] = Field(default_factory=list)
    spec: dict[str, Any] = Field(default_factory=dict)
    created_at: str | None = None


class PipelineJobOut(BaseModel):
    name: str
    stage: str | None
    overrides: list[str]
    depends_on: list[str]
    job_id: int | None = None
    status: str | None = None  # a queued pipeline's jobs: their live state (the DAG page polls it)
    progress: ProgressOut | None = None


class PipelineOut(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "9c1b0d4e3f2a",
                    "name": "sleep_graph",
                    "dry_run": False,
                    "count": 2,
                    "jobs": [
                        {"name": "a", "stage": "sleep", "overrides": [], "depends_on": [], "job_id": 11},
                        {"name": "b", "stage": "sleep", "overrides": [], "depends_on": ["a"], "job_id": 12},
                    ],
                }
            ]
        }
    )

    id: str | None
    name: str
    dry_run: bool
    count: int
    jobs: list[PipelineJobOut]


class GroupBestOut(BaseModel):
    score: float
    job_id: int | None
    result_id: int


class GroupOut(BaseModel):
    """A sweep or pipeline in a list (ptmlab.queue.groups.list_groups)."""

    id: str
    name: str | None
    created_at: str | None
    job_count: int
    counts: dict[str, int] = Field(description="jobs per state: queued, running, succeeded, failed, cancelled")
    finished: int = Field(description="jobs in a terminal state")
    status: str = Field(
        description="running while any job runs, queued while any waits, then failed, cancelled or succeeded"
    )
    best: GroupBestOut | None = Field(description="the highest main score among its jobs' results")


class GroupPage(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "total": 1,
                    "limit": 50,
                    "offset": 0,
                    "items": [
                        {
                            "id": "3f2a9c1b0d4e",
                            "name": "lr_grid",
                            "created_at": "2026-11-22T13:00:00Z",
                            "job_count": 6,
                            "counts": {"queued": 2, "running": 1, "succeeded": 3, "failed": 0, "cancelled": 0},
                            "finished": 3,
                            "status": "running",
                            "best": {"score": 0.83, "job_id": 12, "result_id": 40},
                        }
                    ],
                }
            ]
        }
    )

    total: int
    limit: int
    offset: int
    items: list[GroupOut]


class WorkerFields(BaseModel):
    """A worker as the workers list and the overview both show it."""

    id: str
    hostname: str
    pid: int
    gpus: list[int]
    cpu_slots: int
    queues: list[str]
    status: str
    started_at: str | None
    last_heartbeat: str | None
    multinode: bool = False
    slurm_job_id: str | None = None  # set inside a Slurm allocation
    slurm_node: str | None = None
    ends_at: str | None = None  # the allocation's time limit


class WorkerOut(WorkerFields):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "gpu-host-4242-ab12",
                    "hostname": "gpu-host",
                    "pid": 4242,
                    "gpus": [0, 1],
                    "cpu_slots": 1,
                    "queues": ["default"],
                    "status": "active",
                    "started_at": "2026-11-22T13:00:00Z",
                    "last_heartbeat": "2026-11-22T14:00:00Z",
                    "seconds_since_heartbeat": 1.5,
                    "multinode": False,
                    "slurm_job_id": "4711",
                    "ends_at": "2026-11-23T13:00:00Z",
                }
            ]
        }
    )

    seconds_since_heartbeat: float | None


class CatalogueOut(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "groups": {"model": ["bert_tiny", "gpt_tiny"], "objective": ["clm", "mlm"]},
                    "defaults": {"stage": "pretrain", "model": "bert_tiny", "objective": "mlm"},
                    "stages": {"pretrain": ["model", "objective", "data"], "sleep": []},
                    "pipelines": ["demo", "sleep_graph"],
                }
            ]
        }
    )

    groups: dict[str, list[str]]
    defaults: dict[str, str | None]
    stages: dict[str, list[str]]
    pipelines: list[str]


class ResultOut(BaseModel):
    id: int
    job_id: int | None
    kind: str
    mlflow_run_id: str | None
    sweep_id: str | None
    summary: dict[str, Any]
    tags: dict[str, Any]
    created_at: str | None


class ResultPage(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "total": 1,
                    "limit": 50,
                    "offset": 0,
                    "results": [
                        {
                            "id": 1,
                            "job_id": 7,
                            "kind": "finetune",
                            "mlflow_run_id": "abc",
                            "sweep_id": None,
                            "summary": {"stage": "finetune", "task": "sst2", "main_score": 0.81},
                            "tags": {},
                            "created_at": "2026-11-22T14:00:00Z",
                        }
                    ],
                }
            ]
        }
    )

    total: int
    limit: int
    offset: int
    results: list[ResultOut]


class HealthOut(BaseModel):
    status: str
    database: str


class ErrorBody(BaseModel):
    code: str
    message: str


class ErrorOut(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"error": {"code": "config_error", "message": "In 'config': Could not find 'model/nope' ..."}}]
        }
    )

    error: ErrorBody


class StudyTrialOut(BaseModel):
    number: int
    state: str  # running | complete | pruned | fail | withdrawn (stopped by a budget or a stop)
    params: dict[str, Any]
    value: float | None
    values: list[float] | None = None  # a multi-objective study's: one per objective
    pareto: bool = False  # on a multi-objective study's Pareto front (Optuna's best_trials)
    intermediate: dict[str, float]  # validation number -> objective
    steps: int  # training steps the trial's job reached
    job_id: int | None
    job_status: str | None


class StudyOut(BaseModel):
    id: str
    name: str | None
    spec: dict[str, Any]
    status: str  # running | stopped | finished
    stop_reason: str | None
    created_at: str | None
    started_at: str | None
    finished_at: str | None
    trials: list[StudyTrialOut] = []
    best: StudyTrialOut | None = None
    pareto: list[int] = []  # a multi-objective study's Pareto-optimal trial numbers
    counts: dict[str, int] = {}
    steps_total: int = 0


class StudyPage(BaseModel):
    total: int
    items: list[StudyOut]
