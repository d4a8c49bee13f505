"""A result on its job's page, in its stage's own terms: a fine-tune's metrics, a compressed model
against its source (score, size, speed-up, latency, the settings it ran with), a probe's score per
layer beside its baselines, a pre-training's loss and perplexity, an attack's accuracy before and
under attack with what the attack cost (its examples: ptmlab.views.attack_records).

`result_digest(kind, summary)` -> {"rows": [{"name", "value", "note"}], "probes": [...], "task_kind"}:
numbers stay numbers (the page formats them); a summary a stage wrote without some key just has fewer
rows. A fine-tune's `task_kind` tells the page it has prediction samples to show
(ptmlab.views.prediction_samples); a generation run adds its decoding speed and settings.
"""

from __future__ import annotations

from typing import Any

from ptmlab.contracts.benchmarks import summary_task_kind
from ptmlab.contracts.summaries import (
    AttackSummary,
    CompressSummary,
    FinetuneSummary,
    Measurement,
    PretrainSummary,
    ProbeSummary,
)
from ptmlab.results import number
from ptmlab.views.job_result import summary_as


def _row(name: str, value: Any, note: str = "") -> dict[str, Any] | None:
    value = number(value) if not isinstance(value, str) else value
    return None if value is None else {"name": name, "value": value, "note": note}


def _ratio_note(value: Any, source: Any, what: str) -> str:
    v, s = number(value), number(source)
    return f"{v / s:.3g}× the source's {what}" if v is not None and s not in (None, 0) else ""


def _finetune_rows(s: FinetuneSummary) -> list:
    main = s.main_metric
    rows = [_row(f"{s.task or 'task'} {main}", s.main_score, "main score") if main else None]
    rows += [_row(k, v) for k, v in sorted((s.metrics or {}).items()) if k != main]
    generation = s.generation
    if generation is not None:
        decoding = generation.decoding or {}
        how = ", ".join(f"{k}={decoding[k]}" for k in ("strategy", "num_beams", "max_new_tokens") if k in decoding)
        rows += [
            _row("decoding latency (ms per example)", generation.latency_ms_per_example, how),
            _row("generated tokens/s", generation.tokens_per_s),
        ]
    rows += [
        _row("trainable parameters", s.trainable_params, f"adaptation {s.adaptation or '?'}"),
        _row("training steps", s.steps),
        _row("training time (s)", s.train_time_s),
    ]
    return rows


def _compress_rows(s: CompressSummary) -> list:
    measured, source = s.compressed or Measurement(), s.source or Measurement()
    shown = ", ".join(f"{k}={v}" for k, v in list(s.config.items())[:6])
    headline = s.headline_latency
    return [
        _row("method", s.method or "?", shown),
        _row(
            f"score ({s.main_metric or 'main metric'})",
            measured.score,
            f"source {source.score:.4g}" if number(source.score) is not None else "",
        ),
        _row("retention", s.retention, "score ÷ source score"),
        _row("control score", s.control_score, "the same extra training without compression"),
        _row("size (bytes)", measured.size_bytes, _ratio_note(measured.size_bytes, source.size_bytes, "size")),
        _row("parameters", measured.params, _ratio_note(measured.params, source.params, "parameters")),
        _row("nonzero parameters", measured.nonzero_params),
        _row("latency (ms)", measured.latency_ms, _ratio_note(measured.latency_ms, source.latency_ms, "latency")),
        _row(
            "speed-up",
            (s.speedup or {}).get(headline) if headline else None,
            f"source ÷ compressed latency, {headline}",
        ),
    ]


def _pretrain_rows(s: PretrainSummary) -> list:
    return [
        _row("validation loss", s.val_loss),
        _row("validation perplexity", s.val_perplexity),
        _row("training loss", s.train_loss),
        _row("steps", s.steps),
        _row("tokens seen", s.tokens_seen),
        _row("parameters", s.params),
    ]


def _probe_curves(s: ProbeSummary) -> list[dict[str, Any]]:
    """One entry per probe task: its per-layer scores under the task's metric, the same probe on
    the random-init twin when run, and its flat baselines (majority, layer 0, ...)."""
    tasks = [(t.probe_task, t.metric, t.layers, t.random_init, t.baselines, t.best_layer) for t in s.tasks]
    if not tasks and s.layers:  # a single-task summary keeps its layers at the top
        tasks = [(s.probe_task, s.metric, s.layers, None, s.baselines, None)]
    curves = []
    for probe_task, metric, layers, random_init, baselines, best_layer in tasks:
        # the metric a layer recorded (a key it holds, even null), as the stage wrote it
        metric = metric or next(
            (k for k in ("accuracy", "uuas", "spearman") if any(k in e.model_fields_set for e in layers)), None
        )
        if not layers or metric is None:
            continue  # attention maps and cloze relations have no per-layer curve
        curves.append(
            {
                "probe_task": probe_task,
                "metric": metric,
                "layers": [e.layer for e in layers],
                "scores": [number(getattr(e, metric, None)) for e in layers],
                "control": [number(e.control_accuracy) for e in layers]
                if any("control_accuracy" in e.model_fields_set for e in layers)
                else None,
                "random_init": [number(getattr(e, metric, None)) for e in (random_init.layers if random_init else [])]
                or None,
                "baselines": {k: number(v) for k, v in (baselines or {}).items() if number(v) is not None},
                "best_layer": best_layer,
            }
        )
    return curves


def _attack_rows(s: AttackSummary) -> list:
    counts = s.counts
    attacked = (counts.succeeded or 0) + (counts.failed or 0) if counts is not None else 0
    sample = f"{s.split or '?'} split" + (f", gold class {s.label}" if s.label is not None else "")
    search = s.trigger_search
    return [
        _row("recipe", s.recipe or "?", f"on {s.source or '?'}"),
        _row("clean accuracy", s.clean_accuracy, "on the sample, before any attack"),
        _row("accuracy under attack", s.accuracy_under_attack),
        _row(
            "success rate",
            s.success_rate,
            f"of the {attacked} attacked (classified correctly before)" if counts is not None else "",
        ),
        _row("perturbed word ratio", s.perturbed_word_ratio, "mean, over the successful attacks"),
        _row("queries", s.queries, "mean per attacked example"),
        _row("seconds per example", s.seconds_per_example),
        _row("sample size", s.num_examples, sample),
        _row("seed", s.seed, "draws the sample and each example's random choices"),
        _row(
            "trigger",
            s.trigger,
            f"found on {_known(search.examples)} examples in {_known(search.iterations)} "
            f"iterations ({_known(search.queries)} queries)"
            if search is not None
            else "",
        ),
    ]


def _known(value: Any) -> Any:
    return "?" if value is None else value


ROWS = {
    "finetune": _finetune_rows,
    "multitask": _finetune_rows,
    "compress": _compress_rows,
    "pretrain": _pretrain_rows,
    "attack": _attack_rows,
}


def result_digest(kind: str, summary: dict[str, Any] | None) -> dict[str, Any]:
    stored = summary if isinstance(summary, dict) else {}
    s = summary_as(stored, kind)
    rows = [r for r in ROWS[kind](s) if r is not None] if kind in ROWS else []
    # an older row's task kind shows in fields the contract does not declare: read from the row as stored
    baseline = stored.get("baseline") if isinstance(stored.get("baseline"), dict) else None
    if baseline is not None and rows:
        score = stored.get("main_score")
        below = isinstance(score, int | float) and score <= float(baseline.get("value", 0)) + 1e-9
        rows.append(
            _row(
                "majority-class baseline",
                baseline.get("value"),
                "the score is at or below it: the run learnt nothing" if below else baseline.get("metric", ""),
            )
        )
    # a classification fine-tune's confusion matrix, per-class scores and most confident mistakes
    confusion = stored.get("confusion") if isinstance(stored.get("confusion"), dict) else None
    # a multi-task run: each classification task's confusion and baseline (the first task's is the run's)
    task_confusion = stored.get("task_confusion") if isinstance(stored.get("task_confusion"), dict) else {}
    task_baselines = stored.get("task_baselines") if isinstance(stored.get("task_baselines"), dict) else {}
    task_metrics = stored.get("task_metrics") if isinstance(stored.get("task_metrics"), dict) else {}
    tasks = stored.get("tasks") if isinstance(stored.get("tasks"), list) else []
    for name, base in task_baselines.items():
        if isinstance(base, dict) and tasks[:1] != [name]:  # the first task's is the run's, shown above
            score = (task_metrics.get(name) or {}).get(base.get("metric"))
            below = isinstance(score, int | float) and score <= float(base.get("value", 0)) + 1e-9
            note = "the score is at or below it: the task learnt nothing" if below else base.get("metric", "")
            rows.append(_row(f"majority-class baseline ({name})", base.get("value"), note))
    recipe = stored.get("recipe") if isinstance(stored.get("recipe"), dict) else None
    warnings = stored.get("warnings") if isinstance(stored.get("warnings"), list) else []
    return {
        "rows": [r for r in rows if r is not None],
        # the recipe it trained with, each value's origin, and what was unusual (ptmlab.recipes)
        "recipe": recipe,
        "warnings": [str(w) for w in warnings],
        "probes": _probe_curves(s) if kind == "probe" else [],
        "task_kind": summary_task_kind(stored) if kind == "finetune" else None,
        "confusion": confusion,
        "task_confusions": [
            {"task": name, "confusion": c} for name, c in task_confusion.items() if isinstance(c, dict)
        ],
    }
