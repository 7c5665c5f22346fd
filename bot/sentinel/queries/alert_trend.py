"""get_alert_trend: alerts per time bin and severity over a window, zero-filled (KQL's make-series)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bot.sentinel import demo_sql, kql
from bot.sentinel.demo_sql import iso
from bot.sentinel.models import TrendBin
from bot.sentinel.params import MAX_TREND_BINS, BinSize, InvalidParameter, TimeWindow, parse_bin_size
from bot.sentinel.rows import as_datetime, as_int, as_text
from bot.sentinel.spec import SEVERITY_PARAM, DemoWorkspace, Param, QuerySpec, Row, WindowQuery, window_param


@dataclass(frozen=True)
class AlertTrendQuery(WindowQuery):
    bin_size: BinSize  # resolved on construction: never AUTO

    tool = "get_alert_trend"

    def __post_init__(self) -> None:
        if self.bin_size is BinSize.AUTO:
            object.__setattr__(self, "bin_size", self.bin_size.resolve(self.window))
        bins = self.window.duration / self.bin_size.duration
        if bins > MAX_TREND_BINS:
            raise InvalidParameter(
                "bin_size",
                f"{self.bin_size.value} bins over {self.window.value} would be {int(bins)} bins "
                f"(at most {MAX_TREND_BINS}): use bin_size 1d or auto",
            )

    def parameters(self) -> dict[str, Any]:
        return super().parameters() | {"bin_size": self.bin_size.value}


def _kql(query: AlertTrendQuery) -> str:
    ago = kql.ago(query.window)
    step = "1h" if query.bin_size is BinSize.HOUR else "1d"
    return f"""// get_alert_trend: alerts per {step} bin and severity over the {query.window.label}, zero-filled
SecurityAlert
| where TimeGenerated > {ago}
| summarize arg_max(TimeGenerated, AlertSeverity) by SystemAlertId
| where AlertSeverity in {kql.severity_list(query.min_severity)}
| make-series AlertCount = count() default = 0 on TimeGenerated from bin({ago}, {step}) to now() step {step}
    by AlertSeverity
| mv-expand BinStart = TimeGenerated to typeof(datetime), AlertCount to typeof(long)
| project BinStart, AlertSeverity, AlertCount
| order by BinStart asc, AlertSeverity asc"""


def decode(row: Row) -> TrendBin:
    start = as_datetime(row.get("BinStart"))
    return TrendBin(
        start=start or datetime.fromtimestamp(0, UTC),
        severity=as_text(row.get("AlertSeverity")),
        count=as_int(row.get("AlertCount")),
    )


def _demo(query: AlertTrendQuery, conn: sqlite3.Connection, now: datetime,
          workspace: DemoWorkspace) -> list[dict[str, Any]]:
    params = demo_sql.window_bounds(query.window, now, BinSize.HOUR)
    hourly = query.bin_size is BinSize.HOUR
    # ISO text truncated to the hour or the day is the bin's start.
    prefix = 13 if hourly else 10
    wanted = demo_sql.severities_in(query.min_severity)
    counts = demo_sql.fetch(
        conn,
        f"""WITH {demo_sql.uncounted(wanted)},
            parts AS (
                SELECT substr(TimeGenerated, 1, {prefix}) AS Bin, AlertSeverity, COUNT(*) AS Alerts
                FROM uncounted GROUP BY 1, 2
                UNION ALL
                SELECT substr(Hour, 1, {prefix}), AlertSeverity, SUM(Alerts) FROM AlertHour
                WHERE Hour > :start_bucket AND AlertSeverity IN {wanted} GROUP BY 1, 2)
            SELECT Bin, AlertSeverity, SUM(Alerts) AS AlertCount FROM parts GROUP BY Bin, AlertSeverity""",
        params,
    )
    # make-series: one series per severity present, zero-filled over [bin(start), now).
    step = query.bin_size.duration
    first = demo_sql.floor(now - query.window.duration, step)
    bins = []
    moment = first
    while moment < now:
        bins.append(moment)
        moment += step
    found = {(c["Bin"], c["AlertSeverity"]): c["AlertCount"] for c in counts}
    severities = sorted({c["AlertSeverity"] for c in counts})
    rows = []
    for start in bins:
        key = iso(start)[:prefix]
        for severity in severities:
            count = found.get((key, severity), 0)
            rows.append({"BinStart": iso(start), "AlertSeverity": severity, "AlertCount": count})
    return rows


SPEC = QuerySpec(
    name=AlertTrendQuery.tool,
    params=(window_param(TimeWindow.LAST_7D), SEVERITY_PARAM,
            Param("bin_size", parse_bin_size, "auto = hourly up to 3 days, else daily.",
                  enum=tuple(b.value for b in BinSize), field="bin_size")),
    make=lambda time_window, min_severity, bin_size: AlertTrendQuery(time_window, min_severity, bin_size),
    kql=_kql,
    result=(("BinStart", "datetime"), ("AlertSeverity", "string"), ("AlertCount", "long")),
    keys=("BinStart",),
    decode=decode,
    demo=_demo,
)
