"""Query results -> cards. Each read tool names its card builder (its module in ``bot.tools.queries``); every builder
here takes the same arguments, and ``result_card`` adds what all results share: the error card and the
small "nothing matched" card."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from bot.cards.alerts import alert_list
from bot.cards.common import Element, RefFor, nothing_matched
from bot.cards.entities import top_entities
from bot.cards.filters import filter_label
from bot.cards.incidents import incident_detail, incident_table
from bot.cards.messages import error
from bot.cards.trend import alert_trend
from bot.sentinel.models import QueryError, QueryResult

# (result with at least one record, [n] lookup, now, whether change buttons are offered) -> card
CardBuilder = Callable[[QueryResult, RefFor, datetime, bool], Element]


def incidents_card(result: QueryResult, ref_for: RefFor, now: datetime, changes: bool = False) -> Element:
    return incident_table(result, ref_for, now)


def incident_detail_card(result: QueryResult, ref_for: RefFor, now: datetime, changes: bool = False) -> Element:
    return incident_detail(result.records[0], ref_for, now, demo=result.metadata.is_demo,
                           notes=result.metadata.warnings, changes=changes)


def alerts_card(result: QueryResult, ref_for: RefFor, now: datetime, changes: bool = False) -> Element:
    return alert_list(result, ref_for, now)


def trend_card(result: QueryResult, ref_for: RefFor, now: datetime, changes: bool = False) -> Element:
    return alert_trend(result, now)


def entities_card(result: QueryResult, ref_for: RefFor, now: datetime, changes: bool = False) -> Element:
    return top_entities(result, ref_for, now)


def result_card(result: QueryResult | QueryError, build: CardBuilder, ref_for: RefFor, now: datetime, *,
                changes: bool = False, empty: Callable[[QueryResult], Element] | None = None) -> Element:
    """The card for one tool result; a small "nothing matched" card when it has no rows.

    ``changes``: an incident detail card carries the buttons that propose changes (other cards ignore it).
    """
    if isinstance(result, QueryError):
        hint = "This kind of failure is often temporary: try again in a minute." if result.retry_possible else None
        return error("The query did not run", result.message, hint)
    if not result.records:
        return empty(result) if empty else nothing_matched(result, filter_label(result.metadata.parameters))
    return build(result, ref_for, now, changes)
