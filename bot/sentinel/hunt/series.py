"""``series_decompose_anomalies`` for the demo: the documented algorithm, in plain Python.

Kusto's documentation (``series_decompose``, ``series_outliers``) describes the steps this follows: the seasonal
component is the median of the points of the same phase (none when the period is 0); it is subtracted, and the trend
is a least-squares line through what is left (``linefit``); the baseline is seasonal plus trend, the residual the
series less its baseline; each residual is scored with Tukey's fence test on the 10th-90th percentile range
(``ctukey``, the default): above the 90th percentile, how many ranges above it; below the 10th, how many below (a
negative score); between, 0; a point is anomalous (+1 up, -1 down) when its score passes the threshold.

What the documentation leaves open, chosen here and said so: the percentiles interpolate linearly between the
sorted residuals; when the 10th and 90th percentiles are equal (a flat series), the range counts as 1 (a unit of the
aggregate), so a lone spike over a flat series still scores its height; the period is the hunt's (a day's or a
week's points, ``model.Series``), never auto-detected, so both backends decompose with the same one.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Decomposed:
    """Per point: the flag (+1, -1, 0), the score, the baseline (seasonal + trend)."""

    flags: tuple[int, ...]
    scores: tuple[float, ...]
    baseline: tuple[float, ...]


def seasonal(values: Sequence[float], period: int) -> list[float]:
    """Each point's phase median (``series_decompose``'s seasonal component); zeros without a period."""
    if period <= 1 or len(values) < 2 * period:
        return [0.0] * len(values)
    medians = [float(statistics.median(values[phase::period])) for phase in range(period)]
    return [medians[i % period] for i in range(len(values))]


def linefit(values: Sequence[float]) -> list[float]:
    """The least-squares line through the points, at each point (``trend='linefit'``)."""
    n = len(values)
    if n < 2:
        return [float(v) for v in values]
    mean_x, mean_y = (n - 1) / 2, sum(values) / n
    spread = sum((i - mean_x) ** 2 for i in range(n))
    slope = sum((i - mean_x) * (v - mean_y) for i, v in enumerate(values)) / spread
    return [mean_y + slope * (i - mean_x) for i in range(n)]


def percentile(ordered: Sequence[float], level: float) -> float:
    """The ``level`` percentile of sorted values, interpolated linearly between neighbours."""
    position = (len(ordered) - 1) * level / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def outlier_scores(residuals: Sequence[float], low: float = 10, high: float = 90) -> list[float]:
    """``series_outliers(kind='ctukey')``: how many 10th-90th ranges a point lies beyond that range."""
    if not residuals:
        return []
    ordered = sorted(residuals)
    bottom, top = percentile(ordered, low), percentile(ordered, high)
    spread = (top - bottom) or 1.0
    return [(r - top) / spread if r > top else (r - bottom) / spread if r < bottom else 0.0 for r in residuals]


def decompose_anomalies(values: Sequence[float], threshold: float, period: int) -> Decomposed:
    """``series_decompose_anomalies(values, threshold, period, 'linefit')``."""
    season = seasonal(values, period)
    trend = linefit([v - s for v, s in zip(values, season, strict=True)])
    baseline = [s + t for s, t in zip(season, trend, strict=True)]
    scores = outlier_scores([v - b for v, b in zip(values, baseline, strict=True)])
    flags = tuple(1 if s > threshold else -1 if s < -threshold else 0 for s in scores)
    return Decomposed(flags, tuple(scores), tuple(baseline))
