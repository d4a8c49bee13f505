"""Comparing two configurations over seeds: the difference of means with a 95 % confidence
interval and a p-value, as a paper would report it. Torch-free (the API uses it).

With at least 3 seeds on both sides: Welch's t-test (scipy.stats.ttest_ind, equal_var=False) and
the Welch-Satterthwaite interval. With fewer: a percentile bootstrap of the difference of means
(resampling each side's seeds) and its two-sided bootstrap p-value — scipy.stats.bootstrap needs
two samples per side, and a side with one seed is exactly the case to handle. A side with a
single seed gets a warning: there is no estimate of its variance, so no interval can be trusted.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 10_000
MIN_SEEDS_FOR_T = 3


@dataclass
class SeedComparison:
    a_mean: float
    b_mean: float
    a_n: int
    b_n: int
    diff: float              # mean(a) - mean(b)
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    method: str              # welch | bootstrap
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def compare_seeds(a: Sequence[float], b: Sequence[float], *, confidence: float = CONFIDENCE,
                  resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> SeedComparison:
    a = [float(x) for x in a if x is not None and not math.isnan(x)]
    b = [float(x) for x in b if x is not None and not math.isnan(x)]
    if not a or not b:
        raise ValueError("each side needs at least one seed with a score")
    warnings = [f"{side} has a single seed: no estimate of its seed variance"
                for side, xs in (("A", a), ("B", b)) if len(xs) == 1]
    diff = statistics.fmean(a) - statistics.fmean(b)
    common = dict(a_mean=statistics.fmean(a), b_mean=statistics.fmean(b), a_n=len(a), b_n=len(b), diff=diff)
    if min(len(a), len(b)) >= MIN_SEEDS_FOR_T:
        low, high, p = _welch(a, b, confidence)
        return SeedComparison(**common, ci_low=low, ci_high=high, p_value=p, method="welch", warnings=warnings)
    low, high, p = _bootstrap(a, b, confidence, resamples, seed)
    warnings.append(f"fewer than {MIN_SEEDS_FOR_T} seeds on a side: bootstrap interval and p-value")
    return SeedComparison(**common, ci_low=low, ci_high=high, p_value=p, method="bootstrap", warnings=warnings)


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


def _bootstrap(a: list[float], b: list[float], confidence: float, resamples: int,
               seed: int) -> tuple[float | None, float | None, float | None]:
    import numpy as np

    if len(a) == 1 and len(b) == 1:
        return None, None, None  # one number against one number: nothing to resample
    rng = np.random.default_rng(seed)
    xa, xb = np.asarray(a), np.asarray(b)
    # [resamples] differences of the means of resampled seeds
    diffs = (rng.choice(xa, (resamples, len(xa))).mean(axis=1) - rng.choice(xb, (resamples, len(xb))).mean(axis=1))
    tail = (1 - confidence) / 2
    low, high = np.quantile(diffs, [tail, 1 - tail])
    p = min(1.0, 2 * min(float((diffs <= 0).mean()), float((diffs >= 0).mean())))
    return float(low), float(high), p
