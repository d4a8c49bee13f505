"""The realistic check of stage=compress: every threshold method applied to the session's MiniLM
fine-tuned on the first 8,000 rows of SST-2 (conftest.py `sst2_teacher`, the recipe of
sst2_recipe.py), through the real entry point, each compressed model scored on the full dev set
(872 rows) beside its source. Each method runs once (module fixtures); each test asserts several
things of its run. Accuracy, size and parameter thresholds are asserted here; latencies are
measured (few repeats, to keep the suite short) but never asserted: bench/compression.py checks
them side by side with the settings printed.

Thresholds (a plain PyTorch loop on this kind of machine, issue 11): dynamic int8 size ratio
≤ 0.30 and accuracy drop ≤ 1.5 points; a 3-layer distilled student retains ≥ 0.94 (its no-teacher
control is run by the demo and bench/compression.py, not here); 30 % of heads pruned retains ≥ 0.98 after a
recovery epoch with fewer parameters and FLOPs; 40 % magnitude sparsity retains ≥ 0.98 after a
recovery epoch with the nonzero count within 1 % of the target; SVD at 50 % of the encoder
Linear parameters retains ≥ 0.95 after a recovery epoch. Head and magnitude pruning recover on the
first 2,000 of the teacher's rows; SVD and the distilled student on all 8,000."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.threshold, pytest.mark.timeout(3000)]

# The teacher's recipe (sst2_recipe.py): the same 8,000 rows, length-grouped training batches.
TASK = ["task=glue/sst2", "task.max_length=64", "stage.group_by_length=true"]
TEACHER_ROWS = 8000
# Head and magnitude pruning recover for an epoch on the first 2,000 of those rows (a quarter of the
# run). On d22ffb5's CI teacher (0.8337), alone: heads 30 % retention 1.000 with 2,000 rows (0.990
# with 1,000), sparsity 40 % 0.992 with 2,000; on an earlier CI teacher with 4,000 rows 1.022 and
# 0.996. SVD keeps all 8,000: 0.964-0.966 with 4,000 is too close to its 0.95 threshold (0.988).
RECOVERY_ROWS = 2000
# The recovery methods' no-compression control (the source given the same extra training) is a
# fairness report, not a threshold here: tests/lightning_modules/test_compression_control.py checks
# it on a tiny model; these runs mark their retention "with extra training" instead.
NO_CONTROL = ["compression.control=false"]
# Few repeats on all cores: these tests assert no timing (bench/compression.py does the real measurement).
QUICK_MEASURE = ["stage.measure.repeats=3", "stage.measure.warmup=1", "stage.measure.threads=[0]"]


def compress(teacher, tmp_path_factory, method: str, extra: list[str], source=None, rows: int = TEACHER_ROWS) -> dict:
    run_dir = tmp_path_factory.mktemp(f"compress_{method}") / "run"
    env = {**os.environ, "PTMLAB_HOME": str(teacher.home)}
    env.pop("MLFLOW_TRACKING_URI", None)
    overrides = [
        "stage=compress",
        f"compression={method}",
        *TASK,
        f"task.max_train_samples={rows}",
        f"source={source or teacher.run_dir}",
        *QUICK_MEASURE,
        *extra,
        f"hydra.run.dir={run_dir}",
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "ptmlab.run", *overrides], env=env, capture_output=True, text=True, timeout=2900
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    from ptmlab.contracts.summaries import CompressSummary, validate_summary

    assert isinstance(validate_summary(summary), CompressSummary)  # what the worker checks
    report(summary)
    return summary


def report(s: dict) -> None:
    extra = f", control (no teacher) {s['control_score']:.4f}" if s.get("control_score") is not None else ""
    print(
        f"\n{s['method']}: accuracy {s['compressed']['score']:.4f} (source {s['source']['score']:.4f}, retention "
        f"{s['retention']:.4f}{extra}); params {s['compressed']['params']:,} / {s['source']['params']:,} "
        f"(nonzero {s['compressed']['nonzero_params']:,}); size ratio {s['size_ratio']:.4f} (non-embedding "
        f"{s['non_embedding_size_ratio']:.4f}); FLOPs ratio {s['flops_ratio']:.4f}; latency ratios "
        f"{s['latency_ratio']} (not asserted); {s['wall_time_s']:.0f} s"
    )


def common_checks(s: dict, teacher) -> None:
    assert s["task"] == "sst2" and s["main_metric"] == "accuracy"
    assert s["source"]["score"] == pytest.approx(teacher.summary["main_score"], abs=1e-6)  # the same 872 rows
    assert s["retention"] == pytest.approx(s["compressed"]["score"] / s["source"]["score"], rel=1e-5)
    settings = s["measurement"]
    assert settings["cpu"] and settings["seq_len"] == 64 and settings["repeats"] == 3
    assert (
        set(s["compressed"]["latency"])
        == set(s["source"]["latency"])
        == {f"b{b}_t{settings['threads'][0]}" for b in (1, 32)}
    )


@pytest.fixture(scope="module")
def int8(sst2_teacher, tmp_path_factory):
    return compress(sst2_teacher, tmp_path_factory, "quantize_dynamic", [])


@pytest.fixture(scope="module")
def distilled(sst2_teacher, tmp_path_factory):
    # One epoch (two took 714 s in a CI run). On that CI run's teacher: retention 0.961 with one
    # epoch (0.982 with two); the threshold is 0.94. The no-teacher control (0.805 on that teacher,
    # an epoch of its own: a third of this fixture, 599 s loaded) is a report, not a threshold: the
    # tiny-model distillation in tests/lightning_modules/test_compression.py and the demo's MiniLM
    # student run with it (the default, compression.control=true), and bench/compression.py prints
    # it beside the student of such a run.
    return compress(
        sst2_teacher,
        tmp_path_factory,
        "distill",
        [
            "compression.student_layers=3",
            "compression.epochs=1",
            "compression.temperature=2.0",
            "compression.kd_weight=0.5",
            "compression.ce_weight=0.5",
            *NO_CONTROL,
        ],
    )


@pytest.fixture(scope="module")
def heads_pruned(sst2_teacher, tmp_path_factory):
    return compress(
        sst2_teacher,
        tmp_path_factory,
        "prune_heads",
        ["compression.fraction=0.3", "compression.finetune_epochs=1", *NO_CONTROL],
        rows=RECOVERY_ROWS,
    )


@pytest.fixture(scope="module")
def sparse(sst2_teacher, tmp_path_factory):
    return compress(
        sst2_teacher,
        tmp_path_factory,
        "prune_magnitude",
        ["compression.sparsity=0.4", "compression.finetune_epochs=1", *NO_CONTROL],
        rows=RECOVERY_ROWS,
    )


@pytest.fixture(scope="module")
def factored(sst2_teacher, tmp_path_factory):
    return compress(
        sst2_teacher,
        tmp_path_factory,
        "low_rank",
        ["compression.param_ratio=0.5", "compression.finetune_epochs=1", *NO_CONTROL],
    )


FRESH_PREDICT = textwrap.dedent("""
    import sys, torch
    from safetensors.torch import save_file
    from lightning_modules.artifacts.saved_task_model import load_task_model
    from lightning_modules.heads.evaluation import predict
    from lightning_modules.tasks.spec import load_task
    from ptmlab.config import compose_config
    loaded = load_task_model(sys.argv[1])
    task = load_task(compose_config(["stage=compress", "task=glue/sst2", "task.max_length=64"]).task)
    save_file({"logits": predict(loaded, task, "dev").contiguous()}, sys.argv[2])
""")


def test_dynamic_int8_quarter_size_within_1_5_points_and_reloads_in_a_fresh_process(int8, sst2_teacher, tmp_path):
    common_checks(int8, sst2_teacher)
    assert int8["size_ratio"] <= 0.30
    assert int8["source"]["score"] - int8["compressed"]["score"] <= 0.015
    assert int8["compressed"]["params"] == int8["source"]["params"]  # same weights, int8
    assert int8["edits"] == ["quantize"]
    from safetensors.torch import load_file

    outputs = []
    for i in range(2):  # two fresh processes (default threads, as the stage): the int8 model loads, runs the same
        out = tmp_path / f"logits{i}.safetensors"
        proc = subprocess.run(
            [sys.executable, "-c", FRESH_PREDICT, int8["task_model_dir"], str(out)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        outputs.append(load_file(str(out))["logits"])
    assert outputs[0].shape == (872, 2)
    assert outputs[0].equal(outputs[1])
    import torch

    from lightning_modules.artifacts.saved_task_model import load_task_model

    manifest = load_task_model(int8["task_model_dir"]).manifest
    assert manifest["format_version"] == 2 and manifest["compression"][0]["backend"] == "torch.ao"
    labels = torch.tensor([int(line.split("\t")[1]) for line in (sst2_teacher_data_dev()).read_text().splitlines()[1:]])
    accuracy = float((outputs[0].argmax(-1) == labels).float().mean())
    assert accuracy == pytest.approx(
        int8["compressed"]["score"], abs=1e-6
    )  # the fresh process scores what the stage measured
    the_record_says_the_minilm_ran(int8, sst2_teacher)


def the_record_says_the_minilm_ran(summary: dict, teacher) -> None:
    """The compress run of the fine-tuned MiniLM stores what ran: its config.yaml, summary and
    MLflow params name the MiniLM and its backbone's record, not the composed bert_tiny."""
    import mlflow
    import yaml

    ran = yaml.safe_load((Path(summary["run_dir"]) / "config.yaml").read_text())
    assert ran["model"]["name"] == "minilm" and ran["model"]["family"] == "hf"
    assert ran["objective"]["name"] == teacher.summary["objective"] == "hf"
    assert ran["resolved_backbone"] == teacher.summary["backbone"]
    assert (summary["model"], summary["family"], summary["objective"], summary["tokenizer"]) == (
        "minilm",
        "hf",
        "hf",
        teacher.summary["tokenizer"],
    )
    assert summary["backbone"] == teacher.summary["backbone"]
    assert summary["backbone_source"] == teacher.summary["backbone_source"]
    assert summary["hparams"]["model.name"] == "minilm" and summary["hparams"]["compression.name"] == "quantize_dynamic"
    params = mlflow.MlflowClient(ran["tracking"]["uri"]).get_run(summary["mlflow_run_id"]).data.params
    assert params["model.name"] == "minilm" and params["objective.name"] == "hf"
    assert params["resolved_backbone.model"] == "minilm"


def sst2_teacher_data_dev():
    return Path(os.environ["PTMLAB_DATA_DIR"]) / "glue" / "SST-2" / "dev.tsv"


def test_three_layer_student_retains_94_percent(distilled, sst2_teacher):
    common_checks(distilled, sst2_teacher)
    assert distilled["student_layers"] == 3 and distilled["layer_map"] == [[1, 2], [2, 4], [3, 6]]
    assert distilled["retention"] >= 0.94
    assert distilled.get("control_score") is None and distilled["config"]["control"] is False  # no control run
    assert distilled["compressed"]["params"] < distilled["source"]["params"]
    assert distilled["flops_ratio"] < 0.6  # three of six layers (embeddings cost no FLOPs)
    cache = sst2_teacher.home / "cache" / "compression" / "teacher_logits"
    assert len(list(cache.glob("*.safetensors"))) == 1  # teacher logits computed once, on disk
    manifest = json.loads((Path(distilled["task_model_dir"]) / "task_model.json").read_text())
    config = json.loads((Path(distilled["task_model_dir"]) / "backbone_config" / "config.json").read_text())
    assert config["num_hidden_layers"] == 3 and manifest["format_version"] == 1


def test_thirty_percent_of_heads_pruned_retains_98_percent_after_recovery(heads_pruned, sst2_teacher):
    common_checks(heads_pruned, sst2_teacher)
    assert heads_pruned["heads_before"] == 72 and heads_pruned["heads_after"] == 72 - round(0.3 * 72)
    assert sum(heads_pruned["heads_per_layer"]) == heads_pruned["heads_after"]
    assert heads_pruned["retention"] >= 0.98
    assert heads_pruned["compressed"]["params"] < heads_pruned["source"]["params"]
    assert heads_pruned["compressed"]["flops"] < heads_pruned["source"]["flops"]
    assert heads_pruned["compressed"]["size_bytes"] < heads_pruned["source"]["size_bytes"]


def test_forty_percent_magnitude_sparsity_retains_98_percent_with_nonzero_on_target(sparse, sst2_teacher):
    common_checks(sparse, sst2_teacher)
    assert abs(sparse["sparsity"] - 0.4) <= 0.01
    # the real nonzero count: the source's nonzero weights less those pruned (within 1 % of the target)
    pruned = sparse["source"]["nonzero_params"] - sparse["compressed"]["nonzero_params"]
    assert abs(pruned - 0.4 * sparse["pruned_weights"]) <= 0.01 * sparse["pruned_weights"]
    assert sparse["retention"] >= 0.98
    assert sparse["compressed"]["params"] == sparse["source"]["params"]
    assert sparse["size_ratio"] == pytest.approx(1.0, abs=1e-3)  # stored dense: the size does not change


def test_svd_at_half_the_encoder_linear_parameters_retains_95_percent(factored, sst2_teacher):
    common_checks(factored, sst2_teacher)
    assert 0.45 <= factored["factored_weight_ratio"] <= 0.5
    assert factored["factored_layers"] == 6 * 6  # q, k, v, output, intermediate, output of six layers
    assert factored["retention"] >= 0.95
    assert (
        factored["compressed"]["params"] < factored["source"]["params"]
        and factored["compressed"]["flops"] < factored["source"]["flops"]
    )
