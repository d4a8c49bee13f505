"""Fair compression comparisons (issue 21, item 8): a method that trains after compressing records
the extra training it did and, by default, the score of a control (the source given exactly the
same training, uncompressed) beside its own; with `compression.control=false` its retention is
marked "with extra training" in the summary, the compression view and the CLI/CSV export. Tiny
model (2 layers, 2 heads, 24 SST-2 rows), a few steps each."""

from __future__ import annotations

import json
import random
from types import SimpleNamespace

import pytest

from ptmlab.contracts.summaries import CompressSummary, validate_summary

WORDS = "the a film movie was good bad great awful is not it very and of to".split()
TINY = [
    "model=bert_tiny",
    "model.backbone.num_layers=2",
    "model.backbone.num_heads=2",
    "model.backbone.hidden_size=32",
    "model.backbone.intermediate_size=64",
    "tokenizer.vocab_size=80",
    "tokenizer.min_frequency=1",
    "trainer.enable_progress_bar=false",
    "checkpoint_every_n_steps=0",
    "seed=5",
]
TASK = ["task=glue/sst2", "task.max_train_samples=24", "task.max_eval_samples=16", "task.max_length=24"]
QUICK = [
    "stage.measure.repeats=1",
    "stage.measure.warmup=0",
    "stage.measure.batch_sizes=[1]",
    "stage.measure.threads=[1]",
    "stage.batch_size=8",
    "stage.lr=1e-3",
]


@pytest.fixture(scope="module")
def source(module_ptmlab_home, data_dir, tmp_path_factory):
    from lightning_modules.stages.finetune import run_finetune
    from ptmlab.config import compose_config

    corpus = tmp_path_factory.mktemp("corpus")
    rng = random.Random(0)
    (corpus / "doc.txt").write_text("\n".join(" ".join(rng.choice(WORDS) for _ in range(6)) for _ in range(100)) + "\n")
    run_dir = tmp_path_factory.mktemp("source") / "run"
    run_finetune(
        compose_config(
            [
                "stage=finetune",
                *TINY,
                "data=text_files",
                f"data.corpus.path={corpus}",
                *TASK,
                "stage.epochs=1",
                "stage.batch_size=8",
                f"+run_dir={run_dir}",
            ]
        )
    )
    return run_dir


def compress(source, run_dir, method: str, *extra: str) -> dict:
    from lightning_modules.stages.compress import run_compress
    from ptmlab.config import compose_config

    run_compress(
        compose_config(
            [
                "stage=compress",
                *TASK,
                f"compression={method}",
                f"source={source}",
                *QUICK,
                *extra,
                f"+run_dir={run_dir}",
            ]
        )
    )
    summary = json.loads((run_dir / "summary.json").read_text())
    assert isinstance(validate_summary(summary), CompressSummary)  # what the worker checks
    return summary


def test_pruning_with_recovery_reports_its_extra_training_and_its_controls_score(source, tmp_path):
    s = compress(
        source,
        tmp_path / "pruned",
        "prune_heads",
        "compression.fraction=0.25",
        "compression.steps=1",
        "compression.importance_batches=2",
        "compression.finetune_epochs=2",
    )
    extra = s["extra_training"]
    # 24 rows, batches of 8, 2 epochs: 6 steps over 48 examples of the task's train split
    assert extra["steps"] == 6 and extra["examples"] == 48 and extra["epochs"] == 2
    assert extra["data"]["task"] == "sst2" and extra["data"]["split"] == "train" and extra["data"]["rows"] == 24
    assert [loop["prefix"] for loop in extra["loops"]] == ["recovery"]
    # the control trained exactly the same examples in the same order, for the same steps
    control = s["control_training"]
    assert control["steps"] == extra["steps"] and control["examples"] == extra["examples"]
    assert control["examples_digest"] == extra["examples_digest"]
    assert [(c["epochs"], c["lr"], c["steps"], c["examples_digest"]) for c in control["loops"]] == [
        (e["epochs"], e["lr"], e["steps"], e["examples_digest"]) for e in extra["loops"]
    ]
    assert [c["prefix"] for c in control["loops"]] == ["control"]
    # its score beside the pruned model's, and the retention against both
    assert s["control_score"] is not None and s["retention_with_extra_training"] is False
    assert s["retention_vs_control"] == pytest.approx(s["compressed"]["score"] / s["control_score"], rel=1e-5)
    assert s["control_retention"] == pytest.approx(s["control_score"] / s["source"]["score"], rel=1e-5)
    assert s["config"]["control"] is True


def test_the_control_is_the_source_given_that_training(source, tmp_path):
    """By hand: the source copied and trained as the recovery loop was, then scored, gives the
    control's score (the loop reseeds, so the stage's control and this one see the same batches)."""
    from lightning_modules.compression.base import CompressContext, copy_model, train_epochs
    from lightning_modules.heads.evaluation import evaluate
    from lightning_modules.stages.compress import build_compress
    from ptmlab.config import compose_config

    s = compress(
        source, tmp_path / "low_rank", "low_rank", "compression.param_ratio=0.5", "compression.finetune_epochs=1"
    )
    parts = build_compress(
        compose_config(["stage=compress", *TASK, "compression=low_rank", f"source={source}", *QUICK])
    )
    ctx: CompressContext = parts.ctx
    model = copy_model(parts.source)
    (loop,) = s["extra_training"]["loops"]
    trained = train_epochs(model, parts.source.tokenizer, ctx, epochs=loop["epochs"], lr=loop["lr"])
    assert trained["examples_digest"] == loop["examples_digest"] == s["control_training"]["loops"][0]["examples_digest"]
    metrics = evaluate(model, ctx.task, "dev", tokenizer=parts.source.tokenizer)
    assert metrics["accuracy"] == pytest.approx(s["control_score"], abs=1e-6)


def test_every_loop_of_theseus_is_replayed_by_its_control(source, tmp_path):
    s = compress(
        source,
        tmp_path / "theseus",
        "theseus",
        "compression.successor_layers=1",
        "compression.epochs=1",
        "compression.finetune_epochs=1",
    )
    extra, control = s["extra_training"], s["control_training"]
    assert [loop["prefix"] for loop in extra["loops"]] == ["theseus", "recovery"]
    assert extra["steps"] == 6 and extra["examples"] == 48
    assert [c["examples_digest"] for c in control["loops"]] == [e["examples_digest"] for e in extra["loops"]]
    assert s["control_score"] is not None


def test_without_a_control_the_retention_is_marked_with_extra_training(source, tmp_path):
    from ptmlab.cli.results_compression import render_rows, table_rows
    from ptmlab.views.compression import _point

    s = compress(
        source, tmp_path / "magnitude", "prune_magnitude", "compression.sparsity=0.3", "compression.control=false"
    )
    assert s["retention_with_extra_training"] is True and s["extra_training"]["steps"] == 3
    assert "control_score" not in s and "retention_vs_control" not in s
    # the compression page's point and the CSV export say so
    point = _point(
        SimpleNamespace(id=1, job_id=None, mlflow_run_id=None, sweep_id=None), CompressSummary.model_validate(s)
    )
    assert point["with_extra_training"] is True and point["retention_vs_control"] is None
    header, row = render_rows(table_rows([CompressSummary.model_validate(s)]), "csv").splitlines()
    assert dict(zip(header.split(","), row.split(",")))["with extra training"] == "yes"
    # a method that did not train has nothing to mark or control
    q = compress(source, tmp_path / "int8", "quantize_dynamic")
    assert "extra_training" not in q and q["retention_with_extra_training"] is False
    header, row = render_rows(table_rows([CompressSummary.model_validate(q)]), "csv").splitlines()
    assert dict(zip(header.split(","), row.split(",")))["with extra training"] == ""
