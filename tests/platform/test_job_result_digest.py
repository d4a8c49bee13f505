"""A result in its stage's terms on its job's page (ptmlab.views.job_results `result_digest`): each
kind's rows read from its contract model, and an older or partly broken row shown as far as it
reads once migration 0008 brought it to the current shape."""

from __future__ import annotations

import math

from ptmlab.db.summary_migration import upgraded_summary
from ptmlab.views.job_results import result_digest


def rows(digest: dict) -> dict:
    return {r["name"]: (r["value"], r["note"]) for r in digest["rows"]}


def test_an_attack_and_a_pretrain_row_in_their_stages_terms():
    attack = {
        "stage": "attack",
        "recipe": "textfooler",
        "source": "job:3",
        "task": "sst2",
        "split": "validation",
        "label": "1",
        "num_examples": 20,
        "constraints": {},
        "clean_accuracy": 0.9,
        "accuracy_under_attack": 0.2,
        "success_rate": 0.7,
        "seconds_per_example": 0.3,
        "counts": {"succeeded": 14, "failed": 4, "skipped": 2},
        "seed": 7,
        "trigger": "the the",
        "trigger_search": {"examples": 30, "queries": 900, "iterations": 3},
    }
    shown = rows(result_digest("attack", attack))
    assert shown["recipe"] == ("textfooler", "on job:3")
    assert shown["success rate"] == (0.7, "of the 18 attacked (classified correctly before)")
    assert shown["sample size"] == (20.0, "validation split, gold class 1")
    assert shown["trigger"] == ("the the", "found on 30 examples in 3 iterations (900 queries)")
    assert "queries" not in shown  # not recorded: no row
    pretrain = rows(result_digest("pretrain", {"stage": "pretrain", "val_loss": 2.0, "steps": 5, "train_loss": None}))
    assert pretrain == {"validation loss": (2.0, ""), "steps": (5.0, "")}  # an old row without the required rest


def test_a_probe_suite_and_an_old_single_task_probe():
    suite = {
        "stage": "probe",
        "model": "m",
        "probe_task": "suite",
        "tasks": [
            {
                "probe_task": "upos",
                "family": "token",
                "metric": "accuracy",
                "best_layer": 1,
                "baselines": {"majority": 0.2},
                "layers": [{"layer": 0, "accuracy": 0.5}, {"layer": 1, "accuracy": 0.8}],
                "random_init": {"layers": [{"layer": 0, "accuracy": 0.4}]},
            },
            {"probe_task": "att", "family": "attention", "heatmaps": [{"statistic": "entropy", "values": [[1.0]]}]},
        ],
    }
    (upos,) = result_digest("probe", suite)["probes"]
    assert upos == {
        "probe_task": "upos",
        "metric": "accuracy",
        "layers": [0, 1],
        "scores": [0.5, 0.8],
        "control": None,
        "random_init": [0.4],
        "baselines": {"majority": 0.2},
        "best_layer": 1,
    }
    # no seed, no metric named, a layer's accuracy as text (dropped by migration 0008): the metric
    # is the key the layers hold
    stored = {
        "stage": "probe",
        "model": "m",
        "probe_task": "pos",
        "baselines": {"majority": 0.3, "random": None},
        "layers": [{"layer": 0, "accuracy": "n/a", "control_accuracy": 0.4}, {"layer": 1, "accuracy": 0.7}],
    }
    (pos,) = result_digest("probe", upgraded_summary(stored, "probe"))["probes"]
    assert (pos["metric"], pos["scores"], pos["control"]) == ("accuracy", [None, 0.7], [0.4, None])
    assert pos["random_init"] is None and pos["baselines"] == {"majority": 0.3}


def test_a_finetune_rows_metrics_and_its_generation_speed():
    summary = {
        "stage": "finetune",
        "task": "wmt",
        "adaptation": "lora",
        "metrics": {"bleu": 20.5, "chrf": math.nan},
        "main_metric": "bleu",
        "main_score": 20.5,
        "task_kind": "generation",
        "trainable_params": 100,
        "generation": {
            "decoding": {"strategy": "beam", "num_beams": 4},
            "metric_signatures": {},
            "generated_tokens": 10,
            "latency_ms_per_example": 4.5,
        },
    }
    digest = result_digest("finetune", summary)
    shown = rows(digest)
    assert digest["task_kind"] == "generation" and shown["wmt bleu"] == (20.5, "main score") and "chrf" not in shown
    assert shown["decoding latency (ms per example)"] == (4.5, "strategy=beam, num_beams=4")
    assert shown["trainable parameters"] == (100.0, "adaptation lora") and "generated tokens/s" not in shown
    assert result_digest("sleep", {"stage": "sleep", "seconds": 1}) == {
        "rows": [],
        "probes": [],
        "task_kind": None,
        "confusion": None,
        "recipe": None,
        "warnings": [],
        "task_confusions": [],
    }


def test_a_multitask_row_shows_each_tasks_baseline_and_confusion_and_a_finetune_its_recipe():
    confusion = {"examples": 4, "errors": 1, "labels": ["0", "1"], "matrix": [[2, 0], [1, 1]], "per_class": []}
    summary = {
        "stage": "multitask",
        "model": "bert_tiny",
        "adaptation": "multitask",
        "task": "sst2+rte",
        "tasks": ["sst2", "rte"],
        "metrics": {"accuracy": 0.75},
        "main_metric": "accuracy",
        "main_score": 0.75,
        "task_metrics": {"sst2": {"accuracy": 0.75}, "rte": {"accuracy": 0.5}},
        "trainable_params": 1,
        "total_params": 1,
        "train_time_s": 1.0,
        "steps": 4,
        "baseline": {"kind": "majority_class", "metric": "accuracy", "value": 0.5},
        "task_baselines": {
            "sst2": {"kind": "majority_class", "metric": "accuracy", "value": 0.5},
            "rte": {"kind": "majority_class", "metric": "accuracy", "value": 0.5},
        },
        "confusion": confusion,
        "task_confusion": {"sst2": confusion, "rte": {**confusion, "errors": 2}},
        "recipe": {"name": "none", "requested": "auto", "values": {}},
    }
    digest = result_digest("multitask", summary)
    shown = rows(digest)
    assert shown["majority-class baseline"] == (0.5, "accuracy")
    assert shown["majority-class baseline (rte)"] == (0.5, "the score is at or below it: the task learnt nothing")
    assert "majority-class baseline (sst2)" not in shown  # the run's own, above
    assert [t["task"] for t in digest["task_confusions"]] == ["sst2", "rte"]
    assert digest["recipe"] == summary["recipe"] and digest["warnings"] == []
