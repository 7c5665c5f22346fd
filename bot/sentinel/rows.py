"""Result rows -> typed records, shared by both backends.

Log Analytics returns `dynamic` columns as JSON strings or as parsed values depending on the path
(azure-monitor-query's LogsQueryClient converts only `datetime` columns and passes `dynamic` on as it arrived;
see its source in Azure/azure-sdk-for-python, sdk/monitor/azure-monitor-query), numbers sometimes as strings,
and datetimes as datetime objects or ISO strings. Every decoder here accepts all of those, and never raises on
odd data: a value it cannot read becomes empty rather than failing the whole answer.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, time
from typing import Any

from bot.sentinel.models import (
    AlertSummary,
    ChangedIncident,
    EntityCount,
    EntityRef,
    Incident,
    IncidentDetail,
    IncidentMatch,
    OnCallEntry,
    TrendBin,
    daily_shift,
)

log = logging.getLogger(__name__)

Row = Mapping[str, Any]
MAX_ENTITIES_PER_ALERT_SHOWN = 5
_ENTITY_TYPE_ORDER = ("account", "host", "ip", "mailbox", "url", "dns", "file", "filehash")
_FRACTION = re.compile(r"\.(\d+)")


def as_json(value: Any) -> Any:
    """A dynamic column's value, whether it arrived as JSON text or already parsed."""
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        try:
            return json.loads(text)
        except ValueError:
            return value
    return value


def as_datetime(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str) or not value.strip() or value.strip() == "None":
        return None
    text = value.strip().replace(" ", "T", 1)
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    # Log Analytics writes 7 fractional digits; Python reads at most 6.
    text = _FRACTION.sub(lambda m: "." + m.group(1)[:6].ljust(6, "0"), text, count=1)
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def as_int(value: Any, default: int = 0) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(float(value.strip()))
        except ValueError:
            return default
    return default


def as_text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def as_optional_text(value: Any) -> str | None:
    text = as_text(value).strip()
    return text or None


def as_text_tuple(value: Any) -> tuple[str, ...]:
    """A list column: a dynamic array, JSON text of one, or a comma-separated string."""
    parsed = as_json(value)
    if isinstance(parsed, str):
        items: Sequence[Any] = parsed.split(",")
    elif isinstance(parsed, list):
        items = parsed
    else:
        return ()
    return tuple(dict.fromkeys(t for t in (as_text(i).strip() for i in items) if t))


def tactics(value: Any) -> tuple[str, ...]:
    """MITRE tactics; Sentinel writes "Unknown" when a rule has none, which is no tactic."""
    return tuple(t for t in as_text_tuple(value) if t.lower() != "unknown")


def owner_name(value: Any) -> str | None:
    """The owner's display name: our queries project text, raw rows carry Sentinel's Owner object."""
    parsed = as_json(value)
    if isinstance(parsed, dict):
        for key in ("assignedTo", "email", "userPrincipalName"):
            name = as_optional_text(parsed.get(key))
            if name:
                return name
        return None
    return as_optional_text(value)


def _list_of_dicts(value: Any) -> list[dict[str, Any]]:
    parsed = as_json(value)
    if not isinstance(parsed, list):
        return []
    return [item for item in parsed if isinstance(item, dict)]


def incident(row: Row) -> Incident:
    return Incident(
        number=as_int(row.get("IncidentNumber")),
        title=as_text(row.get("Title")),
        severity=as_text(row.get("Severity")),
        status=as_text(row.get("Status")),
        owner=owner_name(row.get("Owner")),
        created=as_datetime(row.get("CreatedTime")),
        last_modified=as_datetime(row.get("LastModifiedTime")),
        alert_count=as_int(row.get("AlertCount")),
        tactics=tactics(row.get("Tactics")),
        products=as_text_tuple(row.get("Products")),
        url=as_text(row.get("IncidentUrl")),
        classification=as_optional_text(row.get("Classification")),
    )


def incident_detail(row: Row) -> IncidentDetail:
    alerts = [
        AlertSummary(
            alert_id=as_text(a.get("id")),
            name=as_text(a.get("name")),
            severity=as_text(a.get("severity")),
            status=as_text(a.get("status")),
            product=as_text(a.get("product")),
            time=as_datetime(a.get("time")),
            tactics=tactics(a.get("tactics")),
        )
        for a in _list_of_dicts(row.get("Alerts"))
    ]
    alerts.sort(key=lambda a: (-(a.time.timestamp() if a.time else 0), a.alert_id))
    entities = sorted(
        {EntityRef(as_text(e.get("type")), as_text(e.get("value"))) for e in _list_of_dicts(row.get("Entities"))},
        key=lambda e: (_type_order(e.type), e.type, e.value),
    )
    matches = [
        IncidentMatch(number=as_int(m.get("number")), title=as_text(m.get("title")))
        for m in _list_of_dicts(row.get("OtherMatches"))
    ]
    matches.sort(key=lambda m: -m.number)
    raw_labels = as_json(row.get("Labels"))
    labels = tuple(
        as_text(label.get("labelName")) if isinstance(label, dict) else as_text(label)
        for label in (raw_labels if isinstance(raw_labels, list) else ())
        if label
    )
    return IncidentDetail(
        incident=incident(row),
        incident_id=as_text(row.get("IncidentName")),
        description=as_text(row.get("Description")),
        classification_reason=as_optional_text(row.get("ClassificationReason")),
        classification_comment=as_optional_text(row.get("ClassificationComment")),
        closed=as_datetime(row.get("ClosedTime")),
        first_activity=as_datetime(row.get("FirstActivityTime")),
        last_activity=as_datetime(row.get("LastActivityTime")),
        comment_count=as_int(row.get("CommentCount")),
        labels=labels,
        alerts=tuple(alerts),
        entities=tuple(entities),
        other_matches=tuple(matches),
    )


def alert(row: Row) -> AlertSummary:
    labels = as_text_tuple(row.get("EntityLabels"))
    ordered = sorted(labels, key=lambda label: (_type_order(label.split(":", 1)[0]), label))
    return AlertSummary(
        alert_id=as_text(row.get("SystemAlertId")),
        name=as_text(row.get("AlertName")),
        severity=as_text(row.get("AlertSeverity")),
        status=as_text(row.get("Status")),
        product=as_text(row.get("ProductName")),
        time=as_datetime(row.get("TimeGenerated")),
        tactics=tactics(row.get("Tactics")),
        entities=tuple(ordered[:MAX_ENTITIES_PER_ALERT_SHOWN]),
        entity_count=len(labels),
    )


def trend_bin(row: Row) -> TrendBin:
    start = as_datetime(row.get("BinStart"))
    return TrendBin(
        start=start or datetime.fromtimestamp(0, UTC),
        severity=as_text(row.get("AlertSeverity")),
        count=as_int(row.get("AlertCount")),
    )


def entity_count(row: Row) -> EntityCount:
    return EntityCount(
        type=as_text(row.get("EntityType")),
        value=as_text(row.get("EntityValue")),
        alert_count=as_int(row.get("AlertCount")),
        high_severity_count=as_int(row.get("HighSeverityCount")),
        last_seen=as_datetime(row.get("LastSeen")),
        first_seen=as_datetime(row.get("FirstSeen")),
    )


def changed_incident(row: Row) -> ChangedIncident:
    stamp = as_datetime(row.get("TimeGenerated"))
    if stamp is None:  # without it a poller cannot move its cursor past this row
        raise SkippedRow("an incident change without its TimeGenerated")
    return ChangedIncident(incident(row), stamp, description=as_text(row.get("Description")),
                           owner_object_id=as_optional_text(row.get("OwnerObjectId")),
                           owner_upn=as_optional_text(row.get("OwnerUPN")),
                           owner_email=as_optional_text(row.get("OwnerEmail")),
                           owner_assigned_to=as_optional_text(row.get("OwnerAssignedTo")))


class SkippedRow(ValueError):
    """A row the decoder leaves out on purpose; the message says why and holds no row values (it is logged)."""


_DAILY = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")


def on_call_entry(row: Row) -> OnCallEntry:
    """A roster row; one without a UPN (SearchKey or UPN) or with an unreadable shift time is skipped."""
    upn = as_optional_text(row.get("UPN")) or as_optional_text(row.get("SearchKey"))
    if upn is None:
        raise SkippedRow("an on-call row without a UPN")
    as_of = as_datetime(row.get("AsOf")) or datetime.now(UTC)
    start_text, end_text = as_text(row.get("ShiftStart")).strip(), as_text(row.get("ShiftEnd")).strip()
    daily_start, daily_end = _DAILY.match(start_text), _DAILY.match(end_text)
    if daily_start and daily_end:
        start, end = daily_shift(time(int(daily_start[1]), int(daily_start[2])),
                                  time(int(daily_end[1]), int(daily_end[2])), as_of)
        daily = True
    else:
        dated_start, dated_end = _dated(start_text), _dated(end_text)
        if dated_start is None or dated_end is None or dated_end <= dated_start:
            raise SkippedRow("an on-call row with a malformed shift time (HH:MM UTC, or ISO 8601 with a date)")
        start, end, daily = dated_start, dated_end, False
    return OnCallEntry(
        name=as_text(row.get("Name")).strip() or upn, upn=upn, email=as_text(row.get("Email")).strip(),
        phone=as_text(row.get("Phone")).strip(), location=as_text(row.get("Location")).strip(),
        team=as_text(row.get("Team")).strip(), shift_start=start, shift_end=end, daily=daily, as_of=as_of,
    )


def _dated(text: str) -> datetime | None:
    """An ISO 8601 date-time with a date (a bare time or date is not a shift boundary)."""
    return as_datetime(text) if "T" in text or " " in text else None


def _type_order(entity_type: str) -> int:
    try:
        return _ENTITY_TYPE_ORDER.index(entity_type.strip())
    except ValueError:
        return len(_ENTITY_TYPE_ORDER)


def decode_rows(rows: Sequence[Row], decode: Callable[[Row], Any]) -> tuple[list[Any], int]:
    """Decode every row; a row that cannot be read is skipped and counted, not fatal."""
    records, skipped = [], 0
    for row in rows:
        try:
            records.append(decode(row))
        except SkippedRow as exc:
            skipped += 1
            log.warning("skipped %s", exc)
        except (TypeError, ValueError, AttributeError) as exc:
            skipped += 1
            log.warning("skipped an unreadable result row: %s", type(exc).__name__)
    return records, skipped
