"""Every task metric against scikit-learn / scipy on random predictions."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

from lightning_modules.tasks.metrics import compute_metrics, glue_average, glue_task_score, prediction_stats
from ptmlab.errors import ConfigError

SEEDS = range(5)


@pytest.mark.parametrize("seed", SEEDS)
def test_binary_classification_metrics_match_sklearn(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 400))
    labels = rng.integers(0, 2, n)
    preds = np.where(rng.random(n) < 0.7, labels, rng.integers(0, 2, n))  # correlated, not perfect
    got = compute_metrics(["accuracy", "f1", "matthews_correlation", "macro_f1"], preds, labels, num_labels=2)
    assert got["accuracy"] == pytest.approx(accuracy_score(labels, preds), abs=1e-6)
    assert got["f1"] == pytest.approx(f1_score(labels, preds), abs=1e-6)
    assert got["matthews_correlation"] == pytest.approx(matthews_corrcoef(labels, preds), abs=1e-6)
    assert got["macro_f1"] == pytest.approx(f1_score(labels, preds, average="macro"), abs=1e-6)


@pytest.mark.parametrize("seed", SEEDS)
def test_multiclass_metrics_match_sklearn_and_logits_are_argmaxed(seed):
    rng = np.random.default_rng(100 + seed)
    n, c = 300, 3
    labels = rng.integers(0, c, n)
    logits = rng.normal(size=(n, c))
    logits[np.arange(n), labels] += rng.random(n) * 1.5
    preds = logits.argmax(-1)
    got = compute_metrics(["accuracy", "matthews_correlation", "macro_f1"], torch.tensor(logits), labels, num_labels=c)
    assert got["accuracy"] == pytest.approx(accuracy_score(labels, preds), abs=1e-6)
    assert got["matthews_correlation"] == pytest.approx(matthews_corrcoef(labels, preds), abs=1e-6)
    assert got["macro_f1"] == pytest.approx(f1_score(labels, preds, average="macro"), abs=1e-6)


@pytest.mark.parametrize("seed", SEEDS)
def test_regression_metrics_match_scipy(seed):
    rng = np.random.default_rng(200 + seed)
    n = 250
    labels = np.round(rng.uniform(0, 5, n) * 5) / 5  # STS-B-like scores: many ties
    preds = labels + rng.normal(scale=1.0, size=n)
    preds[:20] = np.round(preds[:20])  # ties in the predictions too
    got = compute_metrics(["pearson", "spearmanr", "mse", "mae"], preds.reshape(-1, 1), labels)
    assert got["pearson"] == pytest.approx(pearsonr(preds, labels)[0], abs=1e-5)
    assert got["spearmanr"] == pytest.approx(spearmanr(preds, labels)[0], abs=1e-5)
    assert got["mse"] == pytest.approx(float(np.mean((preds - labels) ** 2)), rel=1e-9)
    assert got["mae"] == pytest.approx(float(np.mean(np.abs(preds - labels))), rel=1e-9)


def test_constant_predictor_is_degenerate_not_an_error():
    labels = np.array([0, 1, 1, 0, 1, 1, 1, 0])
    preds = np.ones_like(labels)
    got = compute_metrics(["matthews_correlation", "accuracy"], preds, labels, num_labels=2)
    assert got["matthews_correlation"] == 0.0 == matthews_corrcoef(labels, preds)
    stats = prediction_stats(preds, labels)
    assert stats["constant_prediction"] and stats["majority_rate"] == pytest.approx(got["accuracy"])
    assert not prediction_stats(np.array([0, 1, 1, 0, 1, 1, 1, 1]), labels)["constant_prediction"]


def test_constant_regression_predictions_give_nan_as_scipy():
    labels = np.array([0.0, 1.0, 2.5, 4.0])
    preds = np.full(4, 2.0)
    with pytest.warns(UserWarning):
        got = compute_metrics(["pearson", "spearmanr"], preds, labels)
    assert math.isnan(got["pearson"]) and math.isnan(got["spearmanr"])
    with pytest.warns(Warning):
        assert math.isnan(spearmanr(preds, labels)[0]) and math.isnan(pearsonr(preds, labels)[0])


def test_binary_f1_refuses_more_than_two_classes_and_unknown_metrics():
    with pytest.raises(ConfigError, match="use macro_f1"):
        compute_metrics(["f1"], [0, 1, 2], [0, 1, 2], num_labels=3)
    with pytest.raises(ConfigError, match="unknown metric 'bleu'"):
        compute_metrics(["accuracy", "bleu"], [0, 1], [0, 1], num_labels=2)


def test_glue_score_means_two_metric_tasks_first():
    per_task = {
        "cola": glue_task_score("cola", {"matthews_correlation": 0.5, "accuracy": 0.8}),
        "mrpc": glue_task_score("mrpc", {"f1": 0.9, "accuracy": 0.8}),
        "stsb": glue_task_score("stsb", {"pearson": 0.88, "spearmanr": 0.86}),
        "mnli": glue_task_score("mnli", {"accuracy": 0.84, "accuracy_mm": 0.82}),
        "mr": 0.99,  # not a GLUE task: ignored
    }
    assert per_task["cola"] == 0.5 and per_task["mrpc"] == pytest.approx(0.85)
    assert per_task["stsb"] == pytest.approx(0.87) and per_task["mnli"] == pytest.approx(0.83)
    assert glue_average(per_task) == pytest.approx((0.5 + 0.85 + 0.87 + 0.83) / 4)
    assert glue_task_score("mnli", {"accuracy": 0.7}) == 0.7  # the single-dev layout: matched only
    assert glue_average({}) is None and math.isnan(float("nan"))
