"""Synthetic result summaries for the dashboard's tests and latency benchmark only (never shown as
results of real runs; not part of the shipped package): deterministic from a seed, and built from
the same typed contracts (ptmlab.contracts) that real stages write, so they cannot drift."""

from __future__ import annotations

import random
from typing import Any

from ptmlab.contracts import CompressSummary, FinetuneSummary, ProbeSummary
from ptmlab.contracts.summaries import Measurement
from ptmlab.leaderboard import GLUE_TASKS

MODELS = ("bert_tiny", "gpt_tiny", "electra_tiny", "albert_tiny", "elmo_tiny", "roberta_tiny")
OBJECTIVES = ("mlm", "clm", "rtd", "mlm_sop", "bilm", "mlm_span")
ADAPTATIONS = ("full", "feature", "adapters")
METHODS = ("prune_magnitude", "quantize_dynamic", "distill", "low_rank")
PROBE_TASKS = ("pos", "dep_arc", "structural")


# The majority-class score of a task's main metric on its dev split (accuracy tasks only: what
# always predicting the training set's majority class scores), as the finetune stage records it.
MAJORITY_BASELINES = {"sst2": 0.509, "rte": 0.527, "qnli": 0.505, "wnli": 0.563}
LEARNING_RATES = (1e-5, 1e-4, 1e-3)
BATCH_SIZES = (16, 32)


def hparams(
    model: str,
    objective: str,
    adaptation: str,
    task: str,
    *,
    lr: float = 1e-4,
    batch_size: int = 16,
    epochs: int = 3,
    rank: int | None = None,
) -> dict[str, Any]:
    """A run's flat config keys (the summary's `hparams`) as ptmlab.contracts.identity writes them."""
    out = {
        "stage.name": "finetune",
        "stage.lr": lr,
        "stage.batch_size": batch_size,
        "stage.epochs": epochs,
        "model.name": model,
        "objective.name": objective,
        "adaptation.name": adaptation,
        "task.name": task,
    }
    if rank is not None:
        out["adaptation.rank"] = rank
    return out


def finetune_summary(
    rng: random.Random,
    model: str,
    objective: str,
    adaptation: str,
    task: str,
    seed: int,
    *,
    lr: float = 1e-4,
    batch_size: int = 16,
) -> dict[str, Any]:
    base = 0.55 + 0.3 * rng.random()
    metrics = {m: round(min(0.99, max(0.0, base + rng.gauss(0, 0.02))), 4) for m in GLUE_TASKS[task][1]}
    return _finetune(
        model,
        objective,
        adaptation,
        task,
        seed,
        metrics,
        params=hparams(model, objective, adaptation, task, lr=lr, batch_size=batch_size),
    )


def _finetune(
    model: str,
    objective: str,
    adaptation: str,
    task: str,
    seed: int,
    metrics: dict,
    footprint: dict | None = None,
    params: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`footprint`: trainable_params, total_params and (newer runs) delta_params, delta_bytes;
    without it the counts of a run from before the delta was recorded. `params`: the run's config
    keys (default: `hparams` of its model, objective, adaptation and task); the majority-class
    baseline where MAJORITY_BASELINES has the task and its main metric is accuracy."""
    main = next(iter(metrics))
    counts = footprint or {"trainable_params": 1000, "total_params": 100_000}
    baseline = (
        {"kind": "majority_class", "metric": main, "value": MAJORITY_BASELINES[task]}
        if task in MAJORITY_BASELINES and main == "accuracy"
        else None
    )
    return FinetuneSummary(
        seed=seed,
        wall_time_s=1.0,
        model=model,
        objective=objective,
        adaptation=adaptation,
        task=task,
        metrics=metrics,
        main_metric=main,
        main_score=metrics[main],
        train_time_s=1.0,
        steps=100,
        **counts,
        hparams=params or hparams(model, objective, adaptation, task),
        baseline=baseline,
    ).model_dump()


def compress_summary(rng: random.Random, method: str, source: str, task: str, seed: int) -> dict[str, Any]:
    source_score, source_params = 0.9, 4_400_000
    keep = rng.uniform(0.1, 0.9)
    return CompressSummary(
        seed=seed,
        wall_time_s=1.0,
        method=method,
        source_ref=source,
        task=task,
        compressed=Measurement(
            score=round(source_score * (0.7 + 0.3 * keep**0.3) - rng.uniform(0, 0.03), 4),
            params=int(source_params * keep),
            size_bytes=int(source_params * keep * rng.choice((1, 4))),
            latency_ms=round(2 + 10 * keep + rng.uniform(0, 1), 3),
        ),
        config={"keep": round(keep, 3)},
        source=Measurement(score=source_score, params=source_params, size_bytes=source_params * 4, latency_ms=12.5),
    ).model_dump(exclude_none=True)


def probe_summary(
    rng: random.Random, model: str, probe_task: str, seed: int, layers: int = 5, heads: int = 4
) -> dict[str, Any]:
    peak = rng.randint(1, layers - 1)
    entries = []
    for layer in range(layers):
        acc = round(0.9 - 0.05 * abs(layer - peak) + rng.uniform(-0.01, 0.01), 4)
        control = round(0.6 + rng.uniform(-0.02, 0.02), 4)
        entry = {"layer": layer, "accuracy": acc, "control_accuracy": control, "selectivity": round(acc - control, 4)}
        if probe_task == "structural":
            entry.update(uuas=round(acc - 0.2, 4), spearman=round(acc - 0.15, 4))
        entries.append(entry)
    return ProbeSummary(
        seed=seed,
        wall_time_s=1.0,
        model=model,
        probe_task=probe_task,
        layers=entries,
        attention_heads={
            "statistic": "entropy",
            "values": [[round(rng.uniform(0.5, 3.0), 3) for _ in range(heads)] for _ in range(layers - 1)],
        },
    ).model_dump(exclude_none=True)


def probe_suite_summary(rng: random.Random, model: str, seed: int, layers: int = 5, heads: int = 4) -> dict[str, Any]:
    """A suite (stage=probe probe=linguistic-like): a token task with control task and random-init
    baseline, a structural task, attention heat maps and a LAMA task, in the ProbeSummary layout
    lightning_modules/stages/probe.py writes."""

    def token_layers(top: float, control: float) -> list[dict]:
        out = []
        for layer in range(layers):
            acc = round(top - 0.04 * abs(layer - 2) + rng.uniform(-0.005, 0.005), 4)
            out.append(
                {"layer": layer, "accuracy": acc, "control_accuracy": control, "selectivity": round(acc - control, 4)}
            )
        return out

    upos, upos_random = token_layers(0.93, 0.6), token_layers(0.7, 0.65)
    distance = [
        {"layer": i, "uuas": round(0.5 + 0.03 * i, 4), "spearman": round(0.6 + 0.03 * i, 4)} for i in range(layers)
    ]
    distance_random = [{"layer": i, "uuas": 0.41, "spearman": 0.5} for i in range(layers)]
    grid = [[round(rng.uniform(0.5, 3.0), 3) for _ in range(heads)] for _ in range(layers - 1)]
    tasks = [
        {
            "probe_task": "upos",
            "family": "token",
            "metric": "accuracy",
            "probe": "linear",
            "layers": upos,
            "best_layer": 2,
            "best_score": upos[2]["accuracy"],
            "best_selectivity": upos[2]["selectivity"],
            "random_init": {"layers": upos_random, "best_layer": 2, "best_score": upos_random[2]["accuracy"]},
            "baselines": {
                "layer0": upos[0]["accuracy"],
                "random_init_best": upos_random[2]["accuracy"],
                "majority": 0.17,
            },
        },
        {
            "probe_task": "distance",
            "family": "structural",
            "metric": "uuas",
            "probe": "rank64",
            "layers": distance,
            "random_init": {"layers": distance_random, "best_layer": 0, "best_score": 0.41},
            "baselines": {"layer0": 0.5, "random_init_best": 0.41},
        },
        {"probe_task": "attention", "family": "attention", "heatmaps": [{"statistic": "entropy", "values": grid}]},
        {
            "probe_task": "lama",
            "family": "cloze",
            "metric": "p_at_1",
            "oov": 1,
            "relations": [
                {"relation": "P19", "facts": 4, "oov": 1, "scored": 3, "p_at_1": 0.3333, "p_at_10": 1.0, "mrr": 0.5}
            ],
        },
    ]
    return ProbeSummary(
        seed=seed,
        wall_time_s=1.0,
        model=model,
        probe_task="linguistic",
        suite="linguistic",
        metric="accuracy",
        layers=upos,
        baselines=tasks[0]["baselines"],
        tasks=tasks,
        attention_heads=tasks[2]["heatmaps"],
    ).model_dump(exclude_none=True)


def synthetic_summaries(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """`n` summaries: ~60% finetune, ~25% compress, ~15% probe, cycling over the grids above."""
    rng = random.Random(seed)
    tasks = list(GLUE_TASKS)
    out = []
    for i in range(n):
        r = i % 20
        if r < 12:
            # each configuration (model, objective, adaptation, task, lr, batch size) once per seed
            out.append(
                finetune_summary(
                    rng,
                    MODELS[i % len(MODELS)],
                    OBJECTIVES[(i // 6) % len(OBJECTIVES)],
                    ADAPTATIONS[(i // 36) % len(ADAPTATIONS)],
                    tasks[(i // 108) % len(tasks)],
                    i // 972,
                    lr=LEARNING_RATES[(i // 4) % 3],
                    batch_size=BATCH_SIZES[(i // 27) % 2],
                )
            )
        elif r < 17:
            out.append(compress_summary(rng, METHODS[i % len(METHODS)], MODELS[i % 2], "sst2", i))
        else:
            out.append(probe_summary(rng, MODELS[i % len(MODELS)], PROBE_TASKS[i % len(PROBE_TASKS)], i))
    return out


# -- a small, hand-checkable dashboard database (browser tests, screenshots) -------------------------
SEED_QUEUE = "seeded"  # seeded queued jobs wait here, out of reach of a test's worker on `default`

SEED_FINETUNE = [  # (model, objective, adaptation, task, seed, metrics)
    ("bert_tiny", "mlm", "full", "sst2", 1, {"accuracy": 0.82}),
    ("bert_tiny", "mlm", "full", "sst2", 2, {"accuracy": 0.84}),
    ("bert_tiny", "mlm", "full", "cola", 1, {"matthews_correlation": 0.21}),
    ("bert_tiny", "mlm", "full", "mrpc", 1, {"f1": 0.80, "accuracy": 0.70}),
    ("bert_tiny", "mlm", "adapters", "sst2", 1, {"accuracy": 0.79}),
    ("bert_tiny", "mlm", "adapters", "cola", 1, {"matthews_correlation": 0.0}),  # degenerate
    ("gpt_tiny", "clm", "full", "sst2", 1, {"accuracy": 0.76}),
    ("gpt_tiny", "clm", "full", "sst2", 2, {"accuracy": 0.78}),
    ("gpt_tiny", "clm", "full", "stsb", 1, {"pearson": 0.40, "spearmanr": 0.38}),
    ("electra_tiny", "rtd", "full", "sst2", 1, {"accuracy": 0.86}),
    ("electra_tiny", "rtd", "full", "rte", 1, {"accuracy": 0.55}),
]
# (method, score, params, size_bytes, latency_ms): chosen so the fronts differ per axis.
SEED_COMPRESS = [
    ("prune_magnitude", 0.86, 2_000_000, 8_000_000, 6.0),
    ("prune_magnitude", 0.80, 1_000_000, 4_000_000, 5.5),
    ("prune_magnitude", 0.70, 1_200_000, 4_800_000, 5.0),  # dominated on params by the one above
    ("quantize_dynamic", 0.87, 4_400_000, 4_500_000, 4.0),
    ("quantize_dynamic", 0.85, 4_400_000, 4_400_000, 7.0),
    ("distill", 0.83, 1_500_000, 6_000_000, 2.5),
    ("distill", 0.75, 500_000, 2_000_000, 1.5),
    ("low_rank", 0.78, 2_500_000, 10_000_000, 8.0),  # dominated everywhere
]
SEED_PROBE_MODELS = ("bert_tiny", "bert_tiny (random init)", "gpt_tiny")
SEED_PROBE_TASKS = ("pos", "structural")


def seed_dashboard(session) -> dict[str, Any]:
    """Jobs in every state (a pipeline among them) and finetune/compress/probe results; returns
    their ids. Uses the queue's own functions where a state can be reached that way."""
    from ptmlab.db.models import CANCELLED, FAILED, RUNNING, SUCCEEDED, Attempt, utcnow
    from ptmlab.queue import submit_job
    from ptmlab.results import new_result

    now = utcnow()
    jobs: dict[str, int] = {}

    def job(label: str, status: str, *, stage: str = "sleep", overrides=(), error=None, depends_on=(), name=None):
        j = submit_job(
            session,
            stage=stage,
            overrides=list(overrides),
            queue=SEED_QUEUE,
            depends_on=list(depends_on),
            name=name,
            tags={"seeded": "true"},
        )
        if status != "queued":
            j.status, j.attempts, j.worker_id = status, 1, "seed-host-1-abc"
            j.started_at = now
            if status == RUNNING:
                # Far in the future: no reaper requeues this job while a test looks at it.
                j.lease_expires_at = now.replace(year=now.year + 5)
            else:
                j.finished_at, j.error, j.exit_code = now, error, (0 if status == SUCCEEDED else 1)
            session.add(
                Attempt(
                    job_id=j.id,
                    number=1,
                    worker_id=j.worker_id,
                    status=status,
                    started_at=now,
                    finished_at=None if status == RUNNING else now,
                    error=error,
                )
            )
        session.commit()
        jobs[label] = j.id
        return j

    job("queued", "queued", overrides=["stage.seconds=5"])
    job("running", RUNNING, overrides=["stage.seconds=600"])
    job("succeeded", SUCCEEDED, stage="finetune", overrides=["model=bert_tiny", "task=glue/sst2", "adaptation=full"])
    job(
        "failed",
        FAILED,
        overrides=["stage.fail=true"],
        error="RuntimeError: stage.fail=true: the sleep stage fails on purpose",
    )
    job("cancelled", CANCELLED, error="cancelled before it started")
    parent = job(
        "pipeline_parent",
        SUCCEEDED,
        stage="pretrain",
        overrides=["model=bert_tiny", "objective=mlm"],
        name="pretrain_mlm",
    )
    job(
        "pipeline_child",
        "queued",
        stage="finetune",
        overrides=["model=bert_tiny", "task=glue/sst2"],
        depends_on=[parent.id],
        name="finetune_sst2",
    )

    results: dict[str, list[int]] = {"finetune": [], "compress": [], "probe": []}
    rows = []
    for model, objective, adaptation, task, seed, metrics in SEED_FINETUNE:
        rows.append(
            new_result(
                _finetune(model, objective, adaptation, task, seed, metrics),
                job_id=jobs["succeeded"] if not rows else None,
                tags={"suite": "glue"},
            )
        )
    for i, (method, score, params, size, latency) in enumerate(SEED_COMPRESS):
        rows.append(
            new_result(
                CompressSummary(
                    seed=i,
                    wall_time_s=1.0,
                    method=method,
                    source_ref="bert_tiny-sst2",
                    task="sst2",
                    compressed=Measurement(score=score, params=params, size_bytes=size, latency_ms=latency),
                    config={"variant": i},
                    source=Measurement(score=0.88, params=4_400_000, size_bytes=17_600_000, latency_ms=9.0),
                ).model_dump(exclude_none=True)
            )
        )
    rng = random.Random(7)
    for model in SEED_PROBE_MODELS:
        for probe_task in SEED_PROBE_TASKS:
            summary = probe_summary(rng, model, probe_task, seed=1)
            summary["model"] = model
            rows.append(new_result(summary))
    session.add_all(rows)
    session.commit()
    for r in rows:
        results[r.kind].append(r.id)
    return {"jobs": jobs, "results": results}


# -- adaptation modes on all-MiniLM-L6-v2 (22,713,216 backbone parameters), a 2-way head (770) ------
_MINILM, _HEAD = 22_713_216, 770


def _footprint(trainable: int, added: int) -> dict[str, int]:
    """`added`: parameters the mode adds to the backbone (LoRA's A/B, prompt vectors); the delta
    is what trains, in fp32."""
    return {
        "trainable_params": trainable,
        "total_params": _MINILM + added + _HEAD,
        "delta_params": trainable,
        "delta_bytes": 4 * trainable,
    }


SEED_ADAPTATION_FOOTPRINTS = {
    "full": _footprint(_MINILM + _HEAD, 0),
    "lora": _footprint(6 * 2 * (384 * 8 + 8 * 384) + _HEAD, 6 * 2 * (384 * 8 + 8 * 384)),  # rank 8 on query, value
    "bitfit": _footprint(26_112 + _HEAD, 0),  # every bias of the backbone
    "prompt_tuning": _footprint(20 * 384 + _HEAD, 20 * 384),  # 20 prompt vectors
}
SEED_ADAPTATION_SCORES = {"full": 0.90, "lora": 0.89, "bitfit": 0.86, "prompt_tuning": 0.80}  # SST-2 accuracy
SEED_ADAPTATION_TAG = {"suite": "adaptation"}


def seed_adaptation_results(session) -> list[int]:
    """MiniLM fine-tuned on SST-2 and RTE with four adaptation modes, two seeds each, tagged
    suite=adaptation; returns the result ids."""
    from ptmlab.results import new_result

    rows = []
    for mode, footprint in SEED_ADAPTATION_FOOTPRINTS.items():
        for task, offset in (("sst2", 0.0), ("rte", -0.25)):
            for seed in (0, 1):
                acc = round(SEED_ADAPTATION_SCORES[mode] + offset + 0.01 * seed, 4)
                rows.append(
                    new_result(
                        _finetune("minilm", "hf", mode, task, seed, {"accuracy": acc}, footprint),
                        tags=SEED_ADAPTATION_TAG,
                    )
                )
    session.add_all(rows)
    session.commit()
    return [r.id for r in rows]


def store_rows_from_before_schema_versions(session, summaries: list[dict[str, Any]]) -> list[Any]:
    """`summaries` stored as rows the way ptmlab stored them before summaries had a schema version
    (as given: no check, values of the wrong type possible), then brought to the current shape by
    migration 0008's own function; the rows, refreshed."""
    from ptmlab.db.models import Result, utcnow
    from ptmlab.db.summary_migration import upgrade_stored_summaries

    rows = [Result(kind=s.get("stage") or "finetune", summary=s, tags={}, created_at=utcnow()) for s in summaries]
    session.add_all(rows)
    session.flush()
    upgrade_stored_summaries(session.connection())
    session.commit()
    for row in rows:
        session.refresh(row)
    return rows
