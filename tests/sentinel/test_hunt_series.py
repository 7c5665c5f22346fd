"""The demo's ``series_decompose_anomalies`` follows the documented algorithm: phase medians as the seasonal part, a
least-squares trend, Tukey's fence on the 10th-90th percentile range of the residuals, the threshold on the score.

Each check builds a series whose answer is known without the code under test: a flat series and its one spike, a
daily pattern that is no anomaly and a spike at a quiet hour that is, a straight line, a dip; the percentile is
Python's own inclusive quantile.
"""

from __future__ import annotations

import math
import random
import statistics

from bot.sentinel.hunt.series import decompose_anomalies, linefit, outlier_scores, percentile, seasonal


def test_a_lone_spike_over_a_flat_series_is_the_one_rise() -> None:
    values = [5.0] * 48
    values[30] = 40.0
    found = decompose_anomalies(values, 1.5, 0)
    assert [i for i, flag in enumerate(found.flags) if flag] == [30] and found.flags[30] == 1
    assert found.scores[30] > 1.5 and abs(found.baseline[0] - 5.0) < 1.0


def test_a_daily_pattern_is_the_baseline_and_a_spike_at_a_quiet_hour_is_the_anomaly() -> None:
    rng = random.Random(3)
    day = [2.0] * 8 + [20.0] * 10 + [2.0] * 6  # quiet nights, busy working hours
    values = [v + rng.uniform(-0.5, 0.5) for _ in range(7) for v in day]
    assert not any(decompose_anomalies(values, 1.5, 24).flags), "a weekday's own rhythm is no anomaly"
    values[5 * 24 + 3] = 20.0  # 03:00 on day six, as busy as noon
    found = decompose_anomalies(values, 1.5, 24)
    assert [i for i, flag in enumerate(found.flags) if flag] == [5 * 24 + 3]
    assert abs(found.baseline[5 * 24 + 3] - 2.0) < 1.0, "expected: a night's level"
    assert not decompose_anomalies(values, 1.5, 0).flags[5 * 24 + 3], \
        "without the period, a night as busy as noon looks ordinary: the seasonal part is what finds it"


def test_a_straight_line_is_all_trend_and_a_dip_is_a_fall() -> None:
    line = [3.0 + 2.0 * i for i in range(30)]
    assert linefit(line) == [math.fsum([3.0, 2.0 * i]) for i in range(30)]
    assert not any(decompose_anomalies(line, 1.5, 0).flags)
    dipped = list(line)
    dipped[12] = 0.0
    found = decompose_anomalies(dipped, 1.5, 0)
    assert found.flags[12] == -1 and found.scores[12] < -1.5 and found.flags.count(0) == 29


def test_the_seasonal_part_is_each_phase_median() -> None:
    values = [1.0, 10.0, 3.0, 30.0, 2.0, 20.0, 100.0, 40.0]
    assert seasonal(values, 2) == [2.5, 25.0] * 4  # medians of 1,3,2,100 and 10,30,20,40
    assert seasonal(values, 0) == [0.0] * 8 and seasonal(values[:3], 2) == [0.0] * 3  # under two periods: none


def test_the_percentiles_and_scores_are_tukeys_fence_on_the_10_90_range() -> None:
    rng = random.Random(9)
    values = sorted(rng.uniform(-5, 5) for _ in range(37))
    deciles = statistics.quantiles(values, n=10, method="inclusive")
    assert math.isclose(percentile(values, 10), deciles[0]) and math.isclose(percentile(values, 90), deciles[-1])
    residuals = [0.0] * 8 + [1.0, -1.0, 10.0]
    low, high = percentile(sorted(residuals), 10), percentile(sorted(residuals), 90)
    scores = outlier_scores(residuals)
    assert scores[10] == (10.0 - high) / (high - low) and scores[0] == 0.0
    assert outlier_scores([]) == [] and outlier_scores([4.0] * 5) == [0.0] * 5
