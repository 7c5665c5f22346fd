"""The alert list card, and the alert table the incident detail card shares."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from bot.cards.common import (
    REF_COLUMN,
    Element,
    RefFor,
    age,
    breakable,
    cell,
    list_card,
    plain,
    ref,
    severity_text,
    subtle,
    table,
    text,
)
from bot.cards.filters import titled
from bot.sentinel.models import AlertSummary, QueryResult, count_label


def alert_list(result: QueryResult, ref_for: RefFor, now: datetime) -> Element:
    """[n] | Alert (name, severity, product and age, entities)."""
    parameters = result.metadata.parameters
    return list_card(result, lambda total: titled(count_label(total, "alert"), parameters), "alerts",
                     "Ask for a shorter window or a higher severity to see the rest.",
                     lambda shown: alert_table(shown, ref_for, now, with_entities=True))


def alert_table(alerts: Sequence[AlertSummary], ref_for: RefFor, now: datetime, *, with_entities: bool) -> Element:
    """[n] | Alert: its name, its severity, product and age, with ``with_entities`` its first entities. The severity
    chip sits under the name: a column of its own left a phone too little room for names ("'BrowserModifier'")."""
    rows = []
    for alert in alerts:
        main = [text(breakable(plain(alert.name, 90))), severity_text(alert.severity, size="small", spacing="small"),
                subtle(f"{breakable(plain(alert.product, 40))} · {age(alert.time, now)}")]
        if with_entities:
            main.append(subtle(f"Entities: {_entities(alert)}"))
        rows.append([cell(text(ref(ref_for, "alert", alert.alert_id), weight="bolder")), cell(*main)])
    return table(["", "Alert"], [REF_COLUMN, 1], rows)


def _entities(alert: AlertSummary) -> str:
    """The first two entity values, whole up to 130 characters (a SHA-256, a URL): "alice@contoso.com, 10.0.0.4 +3"."""
    values = [breakable(plain(entity.partition(": ")[2] or entity, 130)) for entity in alert.entities[:2]]
    more = max(alert.entity_count, len(alert.entities)) - len(values)
    return (", ".join(values) or "-") + (f" +{more}" if more > 0 else "")
