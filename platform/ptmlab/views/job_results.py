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
from ptmlab.contracts.summaries import CompressSummary, Measurement, read_stored_summary
from ptmlab.results import number


def _row(name: str, value: Any, note: str = "") -> dict[str, Any] | None:
    value = number(value) if not isinstance(value, str) else value
    return None if value is None else {"name": name, "value": value, "note": note}


def _ratio_note(value: Any, source: Any, what: str) -> str:
    v, s = number(value), number(source)
    return f"{v / s:.3g}× the source's {what}" if v is not None and s not in (None, 0) else ""


def _finetune_rows(s: dict[str, Any]) -> list:
    main = s.get("main_metric")
    rows = [_row(f"{s.get('task', 'task')} {main}", s.get("main_score"), "main score") if main else None]
    metrics = s.get("metrics") if isinstance(s.get("metrics"), dict) else {}
    rows += [_row(k, v) for k, v in sorted(metrics.items()) if k != main]
    generation = s.get("generation") if isinstance(s.get("generation"), dict) else {}
    if generation:
        decoding = generation.get("decoding") if isinstance(generation.get("decoding"), dict) else {}
        how = ", ".join(f"{k}={decoding[k]}" for k in ("strategy", "num_beams", "max_new_tokens") if k in decoding)
        rows += [_row("decoding latency (ms per example)", generation.get("latency_ms_per_example"), how),
                 _row("generated tokens/s", generation.get("tokens_per_s"))]
    rows += [_row("trainable parameters", s.get("trainable_params"), f"adaptation {s.get('adaptation', '?')}"),
             _row("training steps", s.get("steps")), _row("training time (s)", s.get("train_time_s"))]
    return rows


def _compress_rows(summary: dict[str, Any]) -> list:
    s = read_stored_summary({**summary, "stage": "compress"})
    if not isinstance(s, CompressSummary):
        return []
    measured, source = s.compressed or Measurement(), s.source or Measurement()
    shown = ", ".join(f"{k}={v}" for k, v in list(s.config.items())[:6])
    headline = s.headline_latency
    return [
        _row("method", s.method or "?", shown),
        _row(f"score ({s.main_metric or 'main metric'})", measured.score,
             f"source {source.score:.4g}" if number(source.score) is not None else ""),
        _row("retention", s.retention, "score ÷ source score"),
        _row("control score", s.control_score, "the same extra training without compression"),
        _row("size (bytes)", measured.size_bytes, _ratio_note(measured.size_bytes, source.size_bytes, "size")),
        _row("parameters", measured.params, _ratio_note(measured.params, source.params, "parameters")),
        _row("nonzero parameters", measured.nonzero_params),
        _row("latency (ms)", measured.latency_ms, _ratio_note(measured.latency_ms, source.latency_ms, "latency")),
        _row("speed-up", (s.speedup or {}).get(headline) if headline else None, f"source ÷ compressed latency, {headline}"),
    ]


def _pretrain_rows(s: dict[str, Any]) -> list:
    return [_row("validation loss", s.get("val_loss")), _row("validation perplexity", s.get("val_perplexity")),
            _row("training loss", s.get("train_loss")), _row("steps", s.get("steps")),
            _row("tokens seen", s.get("tokens_seen")), _row("parameters", s.get("params"))]


def _probe_curves(s: dict[str, Any]) -> list[dict[str, Any]]:
    """One entry per probe task: its per-layer scores under the task's metric, the same probe on
    the random-init twin when run, and its flat baselines (majority, layer 0, ...)."""
    tasks = [t for t in s.get("tasks") or [] if isinstance(t, dict)]
    if not tasks and s.get("layers"):  # a single-task summary keeps its layers at the top
        tasks = [{"probe_task": s.get("probe_task"), "metric": s.get("metric"), "layers": s.get("layers"),
                  "baselines": s.get("baselines") or {}}]
    curves = []
    for t in tasks:
        layers = [e for e in t.get("layers") or [] if isinstance(e, dict)]
        metric = t.get("metric") or next((k for k in ("accuracy", "uuas", "spearman") if any(k in e for e in layers)), None)
        if not layers or metric is None:
            continue  # attention maps and cloze relations have no per-layer curve
        random_init = t.get("random_init") if isinstance(t.get("random_init"), dict) else {}
        curves.append({
            "probe_task": t.get("probe_task"), "metric": metric,
            "layers": [e.get("layer") for e in layers], "scores": [number(e.get(metric)) for e in layers],
            "control": [number(e.get("control_accuracy")) for e in layers] if any("control_accuracy" in e for e in layers) else None,
            "random_init": [number(e.get(metric)) for e in random_init.get("layers") or []] or None,
            "baselines": {k: number(v) for k, v in (t.get("baselines") or {}).items() if number(v) is not None},
            "best_layer": t.get("best_layer"),
        })
    return curves


def _attack_rows(s: dict[str, Any]) -> list:
    counts = s.get("counts") if isinstance(s.get("counts"), dict) else {}
    attacked = int(sum(number(counts.get(k)) or 0 for k in ("succeeded", "failed")))
    sample = f"{s.get('split', '?')} split" + (f", gold class {s['label']}" if s.get("label") is not None else "")
    search = s.get("trigger_search") if isinstance(s.get("trigger_search"), dict) else {}
    return [
        _row("recipe", str(s.get("recipe", "?")), f"on {s.get('source', '?')}"),
        _row("clean accuracy", s.get("clean_accuracy"), "on the sample, before any attack"),
        _row("accuracy under attack", s.get("accuracy_under_attack")),
        _row("success rate", s.get("success_rate"), f"of the {attacked} attacked (classified correctly before)"
             if counts else ""),
        _row("perturbed word ratio", s.get("perturbed_word_ratio"), "mean, over the successful attacks"),
        _row("queries", s.get("queries"), "mean per attacked example"),
        _row("seconds per example", s.get("seconds_per_example")),
        _row("sample size", s.get("num_examples"), sample),
        _row("seed", s.get("seed"), "draws the sample and each example's random choices"),
        _row("trigger", s.get("trigger"), f"found on {search.get('examples', '?')} examples in "
             f"{search.get('iterations', '?')} iterations ({search.get('queries', '?')} queries)" if search else ""),
    ]


ROWS = {"finetune": _finetune_rows, "multitask": _finetune_rows, "compress": _compress_rows, "pretrain": _pretrain_rows,
        "attack": _attack_rows}


def result_digest(kind: str, summary: dict[str, Any] | None) -> dict[str, Any]:
    s = summary if isinstance(summary, dict) else {}
    rows = [r for r in ROWS.get(kind, lambda _: [])(s) if r is not None]
    return {"rows": rows, "probes": _probe_curves(s) if kind == "probe" else [],
            "task_kind": summary_task_kind(s) if kind == "finetune" else None}
