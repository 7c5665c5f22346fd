"""The alert trend card: a Teams line chart, one series per severity, with a table fallback.

``Chart.*`` elements are a Teams extension outside the Adaptive Cards 1.5 schema. Clients that do not
know them render the element's ``fallback``: a small table of the same counts in at most 14 rows. The
summary line (total, per severity, peak) sits outside the chart so every client shows it.
Many bins (30 days of hours) are summed into fewer, wider buckets so the card stays small.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from bot.cards.common import (
    SEVERITIES,
    Element,
    as_utc,
    card,
    cell,
    header,
    nothing_matched,
    scope_label,
    severity_label,
    table,
    text,
    warnings,
)
from bot.sentinel.models import QueryResult, TrendBin, count_label
from bot.sentinel.params import InvalidParameter, parse_time_window

MAX_CHART_POINTS = 48
# Teams labels every string x value, and at a phone's width more than about a dozen are cut to their first character
# ("2 2 2 0 0 0" for 22h, 23h, 00h...). Past this many points, x is a number (periods before the last), which the chart
# labels every few points by itself.
MAX_NAMED_POINTS = 12
MAX_TABLE_ROWS = 14
MAX_SERIES = 6
CHART_COLOR = {"High": "attention", "Medium": "warning", "Low": "categoricalBlue", "Informational": "neutral"}
_HOUR, _DAY = timedelta(hours=1), timedelta(days=1)
_STEPS = tuple(_HOUR * h for h in (1, 2, 3, 4, 6, 12)) + tuple(_DAY * d for d in (1, 2, 3, 7, 14, 30, 91, 365))
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

Buckets = dict[datetime, dict[str, int]]  # bucket start -> severity -> alerts


def alert_trend(result: QueryResult, now: datetime | None = None) -> Element:
    """``now``: when the query ran; buckets the time window only partly covers are marked "*" and are never
    the peak (today so far is not a quiet day, nor the first hours of a window a busy one)."""
    meta = result.metadata
    bins = [b for b in result.records if isinstance(b, TrendBin)]
    if not bins:
        return nothing_matched(result)
    base = _HOUR if meta.parameters.get("bin_size") == "1h" else _DAY if meta.parameters.get("bin_size") == "1d" \
        else _infer_step(bins)
    severities = _severities(bins)
    window = _window(meta.parameters.get("time_window"), now)
    chart_step = _step(bins, base, MAX_CHART_POINTS)
    chart_buckets = _without_partial_start(_buckets(bins, chart_step), chart_step, window)
    ago = len(chart_buckets) > MAX_NAMED_POINTS  # too many to label each: a numeric axis, labelled every few points
    # The buckets are consecutive (_buckets fills the gaps): x counts periods back from the last, -23 ... 0.
    xs: list[int | str] = list(range(1 - len(chart_buckets), 1)) if ago else \
        [_short_label(start, chart_step, window) for start in chart_buckets]
    chart = {
        "type": "Chart.Line",
        "title": f"Alerts per {_step_name(chart_step)} (UTC)",
        "xAxisTitle": _ago_title(chart_buckets, chart_step, window) if ago else _axis_title(chart_buckets, chart_step),
        "yAxisTitle": "Alerts",
        "yMin": 0,
        "yMax": y_axis_top(max((n for counts in chart_buckets.values() for n in counts.values()), default=0)),
        "data": [
            {"legend": severity_label(s), "color": CHART_COLOR.get(s, "neutral"),
             "values": [{"x": x, "y": counts.get(s, 0)} for x, counts in zip(xs, chart_buckets.values(), strict=True)]}
            for s in severities
        ],
        "fallback": _fallback(bins, base, severities, window),
    }
    body = header(f"Alert trend ({scope_label(meta.parameters)})", demo=meta.is_demo)
    return card([*body, text(_summary(bins, base, severities, window), size="small"),
                 *warnings(meta.warnings), chart])


def y_axis_top(largest: int) -> int:
    """The top of the chart's y axis (``yMax``, with ``yMin`` 0) for a largest count of ``largest``.

    Teams draws five lines from the bottom to the top of the axis and labels them with decimals (0, 11.5, 23, 34.5,
    46 for a largest count of 46), right-aligned in a 20 px margin when the chart is at most 300 px wide (a phone;
    40 px wider), where two digits fit: "34.5" read "4.5". A top that four steps divide into whole numbers keeps
    every label a whole number and, up to 96 alerts, at most two digits; above, steps of 25 up to 1,000 and then
    1, 2, 2.5 or 5 times a power of ten (labels of three or four characters, 250 or 2.5k: more than a phone's
    margin shows, which no choice of axis avoids)."""
    largest = max(int(largest), 0)
    if largest <= 96:
        return 4 * max(-(-largest // 4), 1)
    if largest <= 1000:
        return 4 * 25 * -(-largest // 100)
    power = 10
    while True:
        for factor in (10, 20, 25, 50):
            if 4 * factor * power >= largest:
                return 4 * factor * power
        power *= 10


Window = tuple[datetime, datetime] | None  # (start, end) of the query's time window, when known


def _window(time_window: object, now: datetime | None) -> Window:
    if now is None:
        return None
    try:
        duration = parse_time_window(time_window).duration
    except InvalidParameter:
        return None
    return as_utc(now) - duration, as_utc(now)


def _without_partial_start(buckets: Buckets, step: timedelta, window: Window) -> Buckets:
    """The chart's buckets less a first one the window only partly covers: a line drawn from a few hours' alerts
    (zero for most severities) read as a quiet first day. The table and the summary keep it, marked partial."""
    first = next(iter(buckets), None)
    if first is None or len(buckets) < 3 or not (window is not None and first < window[0]):
        return buckets
    return {start: counts for start, counts in buckets.items() if start != first}


def _partial(start: datetime, step: timedelta, window: Window) -> bool:
    return window is not None and (start < window[0] or start + step > window[1])


def _short_label(start: datetime, step: timedelta, window: Window) -> str:
    """Chart axis labels are cut after a few characters: the day of the month, or the hour; "*" when partial."""
    label = f"{start:%d}" if step >= _DAY else f"{start:%H}h" if step == _HOUR else f"{start:%d} {start:%H}h"
    return label + ("*" if _partial(start, step, window) else "")


def _axis_title(buckets: Buckets, step: timedelta) -> str:
    first, last = min(buckets), max(buckets)
    span = f"{first:%d %b}" if first.date() == last.date() else f"{first:%d %b}–{last:%d %b}"
    unit = "Day" if step >= _DAY else "Hour"
    return f"{unit} (UTC), {span}; * partly outside the window"


def _ago_title(buckets: Buckets, step: timedelta, window: Window) -> str:
    """ "Hours before 07 Dec 20:00 UTC (0, partial)": what 0 is on the numeric axis, and whether it is partial."""
    last = max(buckets)
    unit = f"{_step_name(step)}s" if step in (_HOUR, _DAY) else f"periods of {_step_name(step)}"
    at = f"{last:%d %b %H:%M}" if step < _DAY else f"{last:%d %b}"
    return f"{unit.capitalize()} before {at} UTC (0{', partial' if _partial(last, step, window) else ''})"


_HEADINGS = {"Medium": "Med"}


def _fallback(bins: Sequence[TrendBin], base: timedelta, severities: Sequence[str], window: Window) -> Element:
    step = _step(bins, base, MAX_TABLE_ROWS)
    rows = [
        [cell(text(_label(start, step) + (" (partial)" if _partial(start, step, window) else ""), size="small")),
         cell(text(str(sum(counts.values())), weight="bolder")),
         *(cell(text(str(counts.get(s, 0)))) for s in severities)]
        for start, counts in _buckets(bins, step).items()
    ]
    # "Med": a phone's column is narrower than "Medium" (the layout test, tests/cards)
    headers = ["Time (UTC)" if step < _DAY else "Day (UTC)", "Total",
               *(_HEADINGS.get(s, severity_label(s)) for s in severities)]
    return {"type": "Container", "items": [
        text(f"Alerts per {_step_name(step)} (UTC)", size="small", weight="bolder"),
        table(headers, [4, 2, *([2] * len(severities))], rows),
    ]}


def _summary(bins: Sequence[TrendBin], base: timedelta, severities: Sequence[str], window: Window) -> str:
    per_severity: dict[str, int] = defaultdict(int)
    per_bin: dict[datetime, int] = defaultdict(int)
    for b in bins:
        per_severity[b.severity] += b.count
        per_bin[as_utc(b.start)] += b.count
    total = sum(per_severity.values())
    parts = " · ".join(f"{severity_label(s)} {per_severity[s]}" for s in severities)
    whole = {start: n for start, n in per_bin.items() if not _partial(start, base, window)} or per_bin
    peak_start, peak = max(whole.items(), key=lambda item: (item[1], item[0]))
    span = f"the hour from {peak_start:%d %b %H:%M}" if base < _DAY else f"the day {peak_start:%a %d %b}"
    partial = " The first and last periods are partial." if len(whole) < len(per_bin) else ""
    return f"{count_label(total, 'alert')}: {parts}. Peak: {peak} in {span} UTC.{partial}"


def _severities(bins: Sequence[TrendBin]) -> list[str]:
    present = {b.severity for b in bins}
    known = [s for s in SEVERITIES if s in present]
    return (known + sorted(present - set(SEVERITIES)))[:MAX_SERIES]


def _infer_step(bins: Sequence[TrendBin]) -> timedelta:
    starts = sorted({as_utc(b.start) for b in bins})
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    return _HOUR if not gaps or min(gaps) < _DAY else _DAY


def _step(bins: Sequence[TrendBin], base: timedelta, limit: int) -> timedelta:
    """The narrowest bucket, at least ``base`` wide, that covers the bins in at most ``limit`` buckets."""
    first, last = min(as_utc(b.start) for b in bins), max(as_utc(b.start) for b in bins)
    for step in _STEPS:
        if step >= base and (_floor(last, step) - _floor(first, step)) // step + 1 <= limit:
            return step
    return _STEPS[-1]


def _buckets(bins: Sequence[TrendBin], step: timedelta) -> Buckets:
    """Counts summed per bucket, every bucket from the first to the last present (empty ones as zero)."""
    buckets: Buckets = {}
    first, last = min(_floor(as_utc(b.start), step) for b in bins), max(_floor(as_utc(b.start), step) for b in bins)
    start = first
    while start <= last:
        buckets[start] = {}
        start += step
    for b in bins:
        counts = buckets[_floor(as_utc(b.start), step)]
        counts[b.severity] = counts.get(b.severity, 0) + b.count
    return buckets


def _floor(moment: datetime, step: timedelta) -> datetime:
    return _EPOCH + ((moment - _EPOCH) // step) * step


def _label(start: datetime, step: timedelta) -> str:
    if step < _DAY:
        return f"{start:%d %b %H:%M}"
    if step == _DAY:
        return f"{start:%a %d %b}"
    end = start + step - _DAY
    return f"{start:%d %b}–{end:%d %b}"


def _step_name(step: timedelta) -> str:
    if step < _DAY:
        hours = step // _HOUR
        return "hour" if hours == 1 else f"{hours} hours"
    days = step // _DAY
    return "day" if days == 1 else f"{days} days"
