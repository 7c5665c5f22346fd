"""One entry point for query results: the right card for the tool that produced them."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from bot.cards.alerts import alert_list
from bot.cards.common import Element, RefFor, nothing_matched
from bot.cards.entities import top_entities
from bot.cards.incidents import incident_detail, incident_table
from bot.cards.messages import error
from bot.cards.trend import alert_trend
from bot.sentinel.models import QueryError, QueryResult

_LISTS: dict[str, Callable[[QueryResult, RefFor, datetime], Element]] = {
    "query_incidents": incident_table,
    "query_alerts": alert_list,
    "get_top_entities": top_entities,
}


def result_card(result: QueryResult | QueryError, ref_for: RefFor, now: datetime, *, changes: bool = False) -> Element:
    """The card for one tool result; a small "nothing matched" card when it has no rows.

    ``changes``: an incident detail card carries the buttons that propose changes (other cards ignore it).
    """
    if isinstance(result, QueryError):
        hint = "This kind of failure is often temporary: try again in a minute." if result.retry_possible else None
        return error("The query did not run", result.message, hint)
    tool = result.metadata.tool
    if not result.records:
        return nothing_matched(result)
    if tool == "get_incident_detail":
        return incident_detail(result.records[0], ref_for, now, demo=result.metadata.is_demo,
                               notes=result.metadata.warnings, changes=changes)
    if tool == "get_alert_trend":
        return alert_trend(result)
    if tool in _LISTS:
        return _LISTS[tool](result, ref_for, now)
    return error("Unknown result", f"There is no card for results of {tool!r}.", None)
