"""stage=compress on the task models other test modules fine-tune (a token tagger, a span head, a
T5, a GPT, Hugging Face LMs): the in-process call those modules share, and what every compressed
model of any kind must satisfy (the summary validates against its contract; the saved model
reloads and scores exactly what the stage measured). Each module reuses its own fine-tuned source."""

from __future__ import annotations

import json

import pytest

# measuring takes few repeats; methods train one short epoch
QUICK = [
    "stage.measure.repeats=2",
    "stage.measure.warmup=1",
    "stage.measure.batch_sizes=[1,4]",
    "stage.measure.threads=[1]",
    "stage.batch_size=8",
    "stage.lr=1e-3",
]
METHODS = {
    "quantize_dynamic": [],
    "drop_layers": ["compression.keep_every=2", "compression.finetune_epochs=0"],
    "prune_magnitude": ["compression.sparsity=0.3", "compression.finetune_epochs=1", "compression.control=false"],
    "distill": ["compression.student_layers=1", "compression.epochs=1"],
}


def task_overrides(finetune_args: list[str]) -> list[str]:
    """A fine-tune's overrides without its stage: the task, model and tokenizer it ran with."""
    return [a for a in finetune_args if not a.startswith(("stage=", "stage."))]


def build(source, run_dir, method: str, common: list[str], extra: list[str] = ()):
    from ptmlab.config import check_config, compose_config, set_runtime_paths

    cfg = compose_config(
        [
            "stage=compress",
            *common,
            f"compression={method}",
            f"source={source}",
            *QUICK,
            *METHODS.get(method, []),
            *extra,
            f"+run_dir={run_dir}",
        ]
    )
    check_config(set_runtime_paths(cfg))
    return cfg


def compress(source, run_dir, method: str, common: list[str], extra: list[str] = ()) -> dict:
    from lightning_modules.stages.compress import run_compress

    run_compress(build(source, run_dir, method, common, extra))
    return json.loads((run_dir / "summary.json").read_text())


def check_reloads_as_measured(summary: dict, task) -> None:
    """The summary is a CompressSummary scored on the task's own main metric, and the exported
    model, loaded again, scores exactly what was measured (a generator: the same decoding)."""
    from lightning_modules.artifacts.saved_task_model import load_task_model
    from lightning_modules.heads.evaluation import evaluate
    from ptmlab.contracts.summaries import CompressSummary, validate_summary

    assert isinstance(validate_summary(summary), CompressSummary)
    assert (
        summary["main_metric"] == task.spec.main_metric
        and summary["compressed"]["score"] == summary["compressed"]["metrics"][task.spec.main_metric]
    )
    assert summary["source"]["score"] is not None and set(summary["compressed"]["latency"]) == {"b1_t1", "b4_t1"}
    assert evaluate(load_task_model(summary["task_model_dir"]), task, "dev") == pytest.approx(
        summary["compressed"]["metrics"], abs=1e-9
    )
    if task.spec.is_generation:  # decoding speed of both, from the scored decoding
        for measured in (summary["compressed"], summary["source"]):
            assert (
                measured["generation"]["latency_ms_per_example"] > 0 and measured["generation"]["generated_tokens"] > 0
            )
        assert summary["measurement"]["latency_of"].startswith("generate()")
        assert all(point["tokens_per_s"] > 0 for point in summary["compressed"]["latency"].values())
