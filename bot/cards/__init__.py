"""Adaptive Cards (1.5) built from typed query results: pure functions, no I/O, no SDKs.

Cards depend only on the data layer's typed data (``bot.sentinel.models``, ``bot.sentinel.changes``).
Every card stays under ``MAX_CARD_BYTES``; text from the workspace is shown as inert plain text (see
``common.plain``). ``plaintext``: the same results as the terminal prints them, as pure as the cards.
"""

from bot.cards.alerts import alert_list
from bot.cards.changes import change_confirmation, change_outcome
from bot.cards.common import MAX_CARD_BYTES, card_size, plain
from bot.cards.entities import top_entities
from bot.cards.footer import SourceLine, attach, footer
from bot.cards.incidents import incident_detail, incident_table
from bot.cards.messages import error, help_card, welcome
from bot.cards.results import (
    CardBuilder,
    alerts_card,
    entities_card,
    incident_detail_card,
    incidents_card,
    result_card,
    trend_card,
)
from bot.cards.trend import alert_trend
from bot.cards.verbs import Verb

__all__ = [
    "MAX_CARD_BYTES",
    "CardBuilder",
    "SourceLine",
    "Verb",
    "alert_list",
    "alert_trend",
    "alerts_card",
    "attach",
    "card_size",
    "change_confirmation",
    "change_outcome",
    "entities_card",
    "error",
    "footer",
    "help_card",
    "incident_detail",
    "incident_detail_card",
    "incident_table",
    "incidents_card",
    "plain",
    "result_card",
    "top_entities",
    "trend_card",
    "welcome",
]
