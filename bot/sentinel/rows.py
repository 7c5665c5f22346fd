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
    bounded_text,
    one_line,
)

log = logging.getLogger(__name__)

Row = Mapping[str, Any]
MAX_ENTITIES_PER_ALERT_SHOWN = 5
_ENTITY_TYPE_ORDER = ("account", "host", "ip", "mailbox", "url", "dns", "file", "filehash")
_FRACTION = re.compile(r"\.(\d+)")
# An alert's own fields: the queries cut its description to MAX_ALERT_DESCRIPTION_CHARS ("…(n more characters)"
# after it, kql.bounded_text); a decoder bounds a row that was not cut the same way, with room for that note.
MAX_ALERT_DESCRIPTION_CHARS = 2000
MAX_REMEDIATION_STEPS = 12
MAX_STEP_CHARS = 1000
MAX_TECHNIQUES = 24
_TECHNIQUE = re.compile(r"(?<![A-Z0-9.])T\d{4}(?:\.\d{3})?(?![0-9]|\.[0-9])")


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


def techniques(*values: Any) -> tuple[str, ...]:
    """MITRE ATT&CK ids from the Techniques and SubTechniques columns (JSON arrays as text, ``["T1003"]``, parsed
    lists, comma-separated or damaged text): each sub-technique, and each technique no sub-technique refines, in
    the order written. Whatever is not a technique id is left out, so these are inert by construction."""
    found: list[str] = []
    for value in values:
        text = value if isinstance(value, str) else json.dumps(value, default=str) if value is not None else ""
        found += _TECHNIQUE.findall(text[:20_000].upper())
    unique = list(dict.fromkeys(found))
    refined = {t.split(".")[0] for t in unique if "." in t}
    return tuple(t for t in unique if t not in refined)[:MAX_TECHNIQUES]


def remediation_steps(value: Any) -> tuple[str, ...]:
    """RemediationSteps: a JSON array of strings as Sentinel writes it, or plain text (one step a line, as Defender
    for Cloud's older rows hold it), each step one line, at most MAX_STEP_CHARS ("…(n more characters)"); past
    MAX_REMEDIATION_STEPS the last one kept says how many more there were."""
    parsed = as_json(value)
    if parsed is None:
        return ()
    items: list[Any] = parsed if isinstance(parsed, list) else parsed.splitlines() \
        if isinstance(parsed, str) else [parsed]
    steps = []
    for item in items:
        text = item if isinstance(item, str) else json.dumps(item, default=str)
        line = one_line(text)
        if line:
            steps.append(bounded_text(line, MAX_STEP_CHARS))
    if len(steps) > MAX_REMEDIATION_STEPS:
        more = len(steps) - MAX_REMEDIATION_STEPS
        steps = [*steps[:MAX_REMEDIATION_STEPS - 1], f"{steps[MAX_REMEDIATION_STEPS - 1]} …({more} more "
                 f"step{'s' if more > 1 else ''})"]
    return tuple(steps)


def alert_description(value: Any) -> str:
    """An alert's description as the query returned it (cut there already), or bounded the same way."""
    text = as_text(value)
    return text if len(text) <= MAX_ALERT_DESCRIPTION_CHARS + 40 else bounded_text(text, MAX_ALERT_DESCRIPTION_CHARS)


def alert_fields(row: Row, names: Mapping[str, str] | None = None) -> dict[str, Any]:
    """An alert's own fields (``AlertSummary``'s description, start, end, techniques, link, remediation) from a
    row holding SecurityAlert's columns; ``names`` maps a column to the key a nested row uses instead."""
    def get(column: str) -> Any:
        return row.get((names or {}).get(column, column))

    return {"description": alert_description(get("Description")), "start": as_datetime(get("StartTime")),
            "end": as_datetime(get("EndTime")), "techniques": techniques(get("Techniques"), get("SubTechniques")),
            "link": one_line(as_text(get("AlertLink"))[:4096]),
            "remediation": remediation_steps(get("RemediationSteps"))}


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
    """Decode every row; a row that cannot be read is skipped and counted, not fatal (the answer says how many)."""
    records, skipped = [], 0
    for row in rows:
        try:
            records.append(decode(row))
        except SkippedRow as exc:
            skipped += 1
            _log_skipped(f"skipped {exc}")
        except (TypeError, ValueError, AttributeError) as exc:
            skipped += 1
            _log_skipped(f"skipped an unreadable result row: {type(exc).__name__}")
    return records, skipped


# Why rows were skipped, each said once a process at WARNING, then at DEBUG: the same broken rows (a watchlist row
# without a UPN) come back on every call, and a console repeating them each turn hides the lines that matter.
_SKIPS_SAID: set[str] = set()
_MAX_SKIPS_SAID = 256


def _log_skipped(why: str) -> None:
    if why in _SKIPS_SAID or len(_SKIPS_SAID) >= _MAX_SKIPS_SAID:
        log.debug("%s", why)
        return
    _SKIPS_SAID.add(why)
    log.warning("%s (said once: the same skip is logged at DEBUG from now on)", why)
