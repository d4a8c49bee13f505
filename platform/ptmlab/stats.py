"""Comparing two configurations over seeds: the difference of means, and a 95 % confidence
interval and p-value only where the seeds support one. Torch-free (the API uses it).

- Each side needs at least 3 seeds, and each side's runs must differ only in their seed (a side
  that pools runs of different configurations has a spread over runs, not seeds: no test).
- Both sides ran the same seeds (at least 3 in common): the paired t-test over those seeds
  (scipy.stats.ttest_rel), its interval the t interval of the mean per-seed difference.
- Otherwise Welch's t-test (scipy.stats.ttest_ind, equal_var=False) with the Welch-Satterthwaite
  interval.
- Fewer seeds: no interval and no p-value; the reason and the raw values are returned instead.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

CONFIDENCE = 0.95
MIN_SEEDS = 3
PAIRED, WELCH = "paired t-test", "Welch t-test"


@dataclass
class SeedComparison:
    a_mean: float
    b_mean: float
    a_n: int
    b_n: int
    diff: float  # mean(a) - mean(b)
    diff_pct: float | None  # diff ÷ |mean(b)|, in percent
    a_values: list[float]
    b_values: list[float]
    test: str | None  # PAIRED | WELCH | None (no test: see `reason`)
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    paired_seeds: list | None = None
    reason: str | None = None
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _finite(values: Sequence[float | None]) -> list[float]:
    return [float(x) for x in values if x is not None and not math.isnan(x)]


def compare_seeds(
    a: Sequence[float],
    b: Sequence[float],
    *,
    a_seeds: Sequence | None = None,
    b_seeds: Sequence | None = None,
    a_pooled: Sequence[str] = (),
    b_pooled: Sequence[str] = (),
    confidence: float = CONFIDENCE,
) -> SeedComparison:
    """`a`, `b`: each side's score per run; `*_seeds`: the seed of each run (for pairing);
    `*_pooled`: the config keys (besides the seed) whose values differ among a side's runs."""
    pairs_a = [
        (s, float(x)) for s, x in zip(a_seeds or [None] * len(a), a, strict=True) if x is not None and not math.isnan(x)
    ]
    pairs_b = [
        (s, float(x)) for s, x in zip(b_seeds or [None] * len(b), b, strict=True) if x is not None and not math.isnan(x)
    ]
    xa, xb = [x for _, x in pairs_a], [x for _, x in pairs_b]
    if not xa or not xb:
        raise ValueError("each side needs at least one seed with a score")
    diff = statistics.fmean(xa) - statistics.fmean(xb)
    b_mean = statistics.fmean(xb)
    out = SeedComparison(
        a_mean=statistics.fmean(xa),
        b_mean=b_mean,
        a_n=len(xa),
        b_n=len(xb),
        diff=diff,
        diff_pct=None if b_mean == 0 else 100 * diff / abs(b_mean),
        a_values=xa,
        b_values=xb,
        test=None,
        ci_low=None,
        ci_high=None,
        p_value=None,
    )
    pooled = [(side, keys) for side, keys in (("A", a_pooled), ("B", b_pooled)) if keys]
    if pooled:
        out.reason = "; ".join(
            f"{side} pools runs of different configs ({', '.join(keys)} differ): spread over runs, no test"
            for side, keys in pooled
        )
        return out
    if min(len(xa), len(xb)) < MIN_SEEDS:
        out.reason = f"n too small: {len(xa)} vs {len(xb)} seeds (need ≥ {MIN_SEEDS} on each side)"
        return out
    by_seed_a, by_seed_b = dict(pairs_a), dict(pairs_b)
    common = [s for s in by_seed_a if s is not None and s in by_seed_b]
    if (
        a_seeds is not None
        and b_seeds is not None
        and len(common) >= MIN_SEEDS
        and len(common) == len(by_seed_a) == len(by_seed_b) == len(xa) == len(xb)
    ):
        out.test, out.paired_seeds = PAIRED, sorted(common, key=str)
        out.ci_low, out.ci_high, out.p_value = _paired(
            [by_seed_a[s] for s in common], [by_seed_b[s] for s in common], confidence
        )
    else:
        out.test = WELCH
        out.ci_low, out.ci_high, out.p_value = _welch(xa, xb, confidence)
    return out


def _paired(a: list[float], b: list[float], confidence: float) -> tuple[float, float, float | None]:
    from scipy import stats

    d = [x - y for x, y in zip(a, b, strict=True)]
    mean = statistics.fmean(d)
    se = statistics.stdev(d) / math.sqrt(len(d))
    if se == 0:  # the same difference on every seed: no spread to test against
        return mean, mean, None if mean == 0 else 0.0
    half = stats.t.ppf(0.5 + confidence / 2, len(d) - 1) * se
    return mean - half, mean + half, float(stats.ttest_rel(a, b).pvalue)


def _welch(a: list[float], b: list[float], confidence: float) -> tuple[float, float, float | None]:
    from scipy import stats

    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    diff = statistics.fmean(a) - statistics.fmean(b)
    se = math.sqrt(va + vb)
    if se == 0:  # identical seeds on both sides: no spread to test against
        return diff, diff, None if diff == 0 else 0.0
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))  # Welch-Satterthwaite
    half = stats.t.ppf(0.5 + confidence / 2, df) * se
    p = float(stats.ttest_ind(a, b, equal_var=False).pvalue)
    return diff - half, diff + half, p
