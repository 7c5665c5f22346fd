"""The top entities card: the accounts, hosts and addresses that appear in the most alerts."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from bot.cards.common import REF_COLUMN, Element, RefFor, age, cell, exact, list_card, plain, ref, subtle, table, text
from bot.sentinel.models import EntityCount, QueryResult
from bot.sentinel.params import MAX_ENTITY_LIMIT


def top_entities(result: QueryResult, ref_for: RefFor, now: datetime) -> Element:
    """[n] | Entity (value, type and last seen) | Alerts | High."""
    return list_card(result, lambda total: "Entities in the most alerts", "entities",
                     lambda shown: _table(shown, ref_for, now), MAX_ENTITY_LIMIT)


def _table(entities: Sequence[EntityCount], ref_for: RefFor, now: datetime) -> Element:
    rows = [
        [
            cell(text(ref(ref_for, "entity", f"{e.type}:{e.value}"), weight="bolder")),
            cell(exact(e.value, 130),  # the value to copy into a query or a block list, as the records hold it
                 subtle(f"{plain(e.type, 24)} · first seen {age(e.first_seen, now)} · last seen {age(e.last_seen, now)}"
                        if e.first_seen else f"{plain(e.type, 24)} · last seen {age(e.last_seen, now)}")),
            cell(text(str(e.alert_count), horizontalAlignment="right")),
            cell(text(str(e.high_severity_count), horizontalAlignment="right",
                      color="attention" if e.high_severity_count else "default",
                      weight="bolder" if e.high_severity_count else "default")),
        ]
        for e in entities
    ]
    return table(["", "Entity", "Alerts", "High"], [REF_COLUMN, 1, "56px", "44px"], rows)
