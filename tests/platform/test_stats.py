"""Two configurations compared over seeds (ptmlab.stats): Welch's t-test and interval agree with
scipy; with fewer than 3 seeds a bootstrap, whose interval covers the observed difference; a
single seed is warned about; a row pair is compared per task and on the GLUE average."""

from __future__ import annotations

import statistics

import pytest
from scipy import stats

from ptmlab.leaderboard import build_leaderboard, compare_rows
from ptmlab.stats import compare_seeds


def test_welch_matches_scipy():
    a, b = [86.1, 87.4, 85.9, 86.8], [83.0, 84.2, 82.5]
    c = compare_seeds(a, b)
    assert c.method == "welch" and c.warnings == []
    assert c.p_value == pytest.approx(stats.ttest_ind(a, b, equal_var=False).pvalue, rel=1e-12)
    va, vb = statistics.variance(a) / 4, statistics.variance(b) / 3
    df = (va + vb) ** 2 / (va**2 / 3 + vb**2 / 2)
    half = stats.t.ppf(0.975, df) * (va + vb) ** 0.5
    assert c.diff == pytest.approx(statistics.fmean(a) - statistics.fmean(b))
    assert (c.ci_low, c.ci_high) == (pytest.approx(c.diff - half), pytest.approx(c.diff + half))
    # scipy's own interval for the same test (scipy >= 1.11)
    ci = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert (c.ci_low, c.ci_high) == (pytest.approx(ci.low), pytest.approx(ci.high))


def test_few_seeds_bootstrap_and_single_seed_warning():
    c = compare_seeds([83.0, 84.0], [76.0, 78.0])
    assert c.method == "bootstrap" and c.ci_low <= c.diff <= c.ci_high and c.ci_low > 0
    assert c.p_value < 0.05 and any("bootstrap" in w for w in c.warnings)
    one = compare_seeds([86.0], [82.0, 84.0])
    assert any(w.startswith("A has a single seed") for w in one.warnings)
    both = compare_seeds([86.0], [83.0])
    assert both.diff == pytest.approx(3.0) and both.ci_low is None and both.p_value is None
    assert compare_seeds([80.0, 81.0], [80.0, 81.0], seed=1).p_value == 1.0  # nothing between them


def test_rows_compared_per_task_and_on_the_glue_average():
    def run(model, task, seed, value, metric="accuracy"):
        return {"stage": "finetune", "model": model, "objective": "mlm", "adaptation": "full", "task": task,
                "seed": seed, "metrics": {metric: value}}

    summaries = [run(m, "sst2", s, v) for m, vals in (("a", (0.86, 0.87, 0.85)), ("b", (0.83, 0.84, 0.82)))
                 for s, v in enumerate(vals)]
    summaries += [run(m, "rte", s, v) for m, vals in (("a", (0.60, 0.62, 0.61)), ("b", (0.58, 0.57, 0.59)))
                  for s, v in enumerate(vals)]
    board = build_leaderboard(summaries)
    result = {c["task"]: c for c in compare_rows(board, "a / mlm / full", "b / mlm / full")}
    assert set(result) == {"sst2", "rte", "glue"}
    assert result["sst2"]["diff"] == pytest.approx(3.0)
    glue_a = [100 * (x + y) / 2 for x, y in zip((0.86, 0.87, 0.85), (0.60, 0.62, 0.61))]
    glue_b = [100 * (x + y) / 2 for x, y in zip((0.83, 0.84, 0.82), (0.58, 0.57, 0.59))]
    assert result["glue"]["p_value"] == pytest.approx(stats.ttest_ind(glue_a, glue_b, equal_var=False).pvalue)
    with pytest.raises(Exception, match="no leaderboard row 'c / mlm / full'"):
        compare_rows(board, "a / mlm / full", "c / mlm / full")
