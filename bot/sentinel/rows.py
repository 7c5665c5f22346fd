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
from datetime import UTC, datetime
from typing import Any

from bot.sentinel.models import (
    Incident,
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


def list_of_dicts(value: Any) -> list[dict[str, Any]]:
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


class SkippedRow(ValueError):
    """A row the decoder leaves out on purpose; the message says why and holds no row values (it is logged)."""


def type_order(entity_type: str) -> int:
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
