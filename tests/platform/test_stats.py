"""Two configurations compared over seeds (ptmlab.stats): an interval and p-value only with at
least 3 seeds a side and no pooled configs; the paired t-test when both sides ran the same seeds,
Welch's otherwise, each agreeing with scipy; fewer seeds say "n too small" with the raw values;
a row pair is compared per task and on the GLUE average, and leaderboard rows hold one
configuration each unless the user pools them."""

from __future__ import annotations

import statistics

import pytest
from scipy import stats

from ptmlab.leaderboard import build_leaderboard, compare_rows
from ptmlab.stats import compare_seeds


def test_welch_matches_scipy():
    a, b = [86.1, 87.4, 85.9, 86.8], [83.0, 84.2, 82.5]
    c = compare_seeds(a, b)
    assert c.test == "Welch t-test" and c.reason is None
    assert c.p_value == pytest.approx(stats.ttest_ind(a, b, equal_var=False).pvalue, rel=1e-12)
    va, vb = statistics.variance(a) / 4, statistics.variance(b) / 3
    df = (va + vb) ** 2 / (va**2 / 3 + vb**2 / 2)
    half = stats.t.ppf(0.975, df) * (va + vb) ** 0.5
    assert c.diff == pytest.approx(statistics.fmean(a) - statistics.fmean(b))
    assert (c.ci_low, c.ci_high) == (pytest.approx(c.diff - half), pytest.approx(c.diff + half))
    # scipy's own interval for the same test (scipy >= 1.11)
    ci = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert (c.ci_low, c.ci_high) == (pytest.approx(ci.low), pytest.approx(ci.high))


def test_the_same_seeds_on_both_sides_are_paired():
    a, b = [86.1, 87.4, 85.9], [85.0, 86.9, 85.1]
    c = compare_seeds(a, b, a_seeds=[1, 2, 3], b_seeds=[1, 2, 3])
    assert c.test == "paired t-test" and c.paired_seeds == [1, 2, 3]
    paired = stats.ttest_rel(a, b)
    assert c.p_value == pytest.approx(paired.pvalue, rel=1e-12)
    ci = paired.confidence_interval(0.95)
    assert (c.ci_low, c.ci_high) == (pytest.approx(ci.low), pytest.approx(ci.high))
    # different seeds: Welch
    assert compare_seeds(a, b, a_seeds=[1, 2, 3], b_seeds=[4, 5, 6]).test == "Welch t-test"


def test_fewer_than_three_seeds_or_pooled_configs_get_no_interval_and_no_p_value():
    c = compare_seeds([83.0, 84.0], [76.0])
    assert c.test is None and c.ci_low is None and c.ci_high is None and c.p_value is None
    assert c.reason == "n too small: 2 vs 1 seeds (need ≥ 3 on each side)"
    assert c.a_values == [83.0, 84.0] and c.b_values == [76.0] and c.diff == pytest.approx(7.5)
    pooled = compare_seeds([80.0, 81.0, 82.0], [70.0, 71.0, 72.0], a_pooled=["stage.lr"])
    assert (
        pooled.test is None
        and pooled.p_value is None
        and "A pools runs of different configs (stage.lr differ)" in pooled.reason
    )


def _run(model, task, seed, value, lr=1e-4, metric="accuracy", baseline=None):
    return {
        "stage": "finetune",
        "model": model,
        "objective": "mlm",
        "adaptation": "full",
        "task": task,
        "seed": seed,
        "metrics": {metric: value},
        "main_metric": metric,
        "main_score": value,
        "hparams": {"model.name": model, "stage.lr": lr, "task.name": task},
        **({"baseline": {"metric": metric, "value": baseline}} if baseline is not None else {}),
    }


def test_rows_hold_one_config_unless_pooled_and_a_pool_names_what_differs():
    runs = [_run("a", "sst2", s, v, lr) for s, (v, lr) in enumerate([(0.80, 1e-4), (0.82, 1e-4), (0.60, 1e-3)])]
    board = build_leaderboard(runs)
    labels = sorted(r.label for r in board.rows)
    assert labels == ["a / mlm / full · stage.lr=0.0001", "a / mlm / full · stage.lr=0.001"]
    cell = next(r for r in board.rows if r.distinct == {"stage.lr": "0.0001"}).cells["sst2"]
    assert cell.score.n == 2 and cell.varying == [] and cell.spread == "seeds"
    pooled = build_leaderboard(runs, pool=True)
    (row,) = pooled.rows
    assert (
        row.label == "a / mlm / full"
        and row.cells["sst2"].varying == ["stage.lr"]
        and row.cells["sst2"].spread == "runs"
    )
    # grouping by a config key: one row per learning rate, averaged over its seeds
    by_lr = build_leaderboard(runs, group_by=["model", "stage.lr"])
    assert {r.label: r.cells["sst2"].score.n for r in by_lr.rows} == {"a / 0.0001": 2, "a / 0.001": 1}


def test_two_runs_against_one_get_no_test_and_three_against_three_seeds_are_paired():
    runs = [_run("a", "sst2", s, v) for s, v in ((1, 0.80), (2, 0.82))] + [_run("b", "sst2", 1, 0.70)]
    result = {c["task"]: c for c in compare_rows(build_leaderboard(runs), "a / mlm / full", "b / mlm / full")}
    assert result["sst2"]["test"] is None and result["sst2"]["p_value"] is None and result["sst2"]["ci_low"] is None
    assert result["sst2"]["reason"].startswith("n too small: 2 vs 1") and result["sst2"]["a_values"] == [80.0, 82.0]
    runs = [
        _run(m, "sst2", s, v + d) for m, d in (("a", 0.0), ("b", -0.05)) for s, v in ((1, 0.80), (2, 0.83), (3, 0.81))
    ]
    result = {c["task"]: c for c in compare_rows(build_leaderboard(runs), "a / mlm / full", "b / mlm / full")}
    assert result["sst2"]["test"] == "paired t-test" and result["sst2"]["paired_seeds"] == [1, 2, 3]
    assert result["sst2"]["diff"] == pytest.approx(5.0) and result["sst2"]["a_n"] == result["sst2"]["b_n"] == 3


def test_a_run_at_its_majority_class_baseline_is_marked_degenerate():
    runs = [_run("a", "sst2", s, 0.509, baseline=0.509) for s in (1, 2)] + [_run("b", "sst2", 1, 0.80, baseline=0.509)]
    board = build_leaderboard(runs)
    a = next(r for r in board.rows if r.config["model"] == "a").cells["sst2"]
    b = next(r for r in board.rows if r.config["model"] == "b").cells["sst2"]
    assert a.degenerate == {"baseline": 0.509, "metric": "accuracy", "kind": "majority_class", "runs": 2}
    assert any("majority-class baseline (50.9)" in f for f in a.flags)
    assert b.degenerate is None and not b.flags


def test_rows_compared_per_task_and_on_the_glue_average():
    def run(model, task, seed, value, metric="accuracy"):
        return {
            "stage": "finetune",
            "model": model,
            "objective": "mlm",
            "adaptation": "full",
            "task": task,
            "seed": seed,
            "metrics": {metric: value},
        }

    summaries = [
        run(m, "sst2", s, v)
        for m, vals in (("a", (0.86, 0.87, 0.85)), ("b", (0.83, 0.84, 0.82)))
        for s, v in enumerate(vals)
    ]
    summaries += [
        run(m, "rte", s, v)
        for m, vals in (("a", (0.60, 0.62, 0.61)), ("b", (0.58, 0.57, 0.59)))
        for s, v in enumerate(vals)
    ]
    board = build_leaderboard(summaries)
    result = {c["task"]: c for c in compare_rows(board, "a / mlm / full", "b / mlm / full")}
    assert set(result) == {"sst2", "rte", "glue"}
    assert result["sst2"]["diff"] == pytest.approx(3.0)
    glue_a = [100 * (x + y) / 2 for x, y in zip((0.86, 0.87, 0.85), (0.60, 0.62, 0.61))]
    glue_b = [100 * (x + y) / 2 for x, y in zip((0.83, 0.84, 0.82), (0.58, 0.57, 0.59))]
    # both rows ran seeds 0, 1, 2 of every task: their per-seed GLUE averages pair
    assert result["glue"]["test"] == "paired t-test" and result["glue"]["paired_seeds"] == [0, 1, 2]
    assert result["glue"]["p_value"] == pytest.approx(stats.ttest_rel(glue_a, glue_b).pvalue)
    ci = stats.ttest_rel(glue_a, glue_b).confidence_interval(0.95)
    assert (result["glue"]["ci_low"], result["glue"]["ci_high"]) == (pytest.approx(ci.low), pytest.approx(ci.high))
    with pytest.raises(Exception, match="no leaderboard row 'c / mlm / full'"):
        compare_rows(board, "a / mlm / full", "c / mlm / full")
