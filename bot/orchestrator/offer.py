"""Which tool definitions a model call carries: the base ones on every call, a tool's extended parameters only where
their use is likely.

The hunt's computed columns, sessions, series, a join's leftouter kind and time proximity, and having's comparison
of two results cost tokens every call cannot carry (the every-call budgets of
``tests/orchestrator/test_prompt_contract.py``). They are offered on a turn whose words ask for a hunt, a look over
time (spikes, anomalies, a baseline, sessions, bursts, "within 10 minutes", "after the"), a value taken out of a field
(extract, split, parse) or whose conversation's last tool call was a hunt (a follow-up refines it). The tool's
parser accepts them on any turn: an unoffered argument the model sends anyway still runs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from bot.orchestrator.items import Item, ModelMessage

HUNT_TOOL = "hunt"

_HUNTING_WORDS = re.compile(
    r"\b(?:hunt\w*|anomal\w*|spik(?:e|es|ed|ing)|bursts?|baselines?|sessions?|outliers?|surg(?:e|es|ed|ing)|"
    r"time[ -]?series|over time|per (?:hour|day)|hourly|daily|beacon\w*|unusual\w*|abnormal\w*|"
    r"extract\w*|split\w*|pars(?:e|es|ed|ing)|left ?outer|(?:after|before) (?:it|the|that|each|a)|"
    r"within \d+\s*(?:s|sec\w*|m|mins?|minutes?|h|hours?))\b", re.IGNORECASE)


def hunt_likely(text: str, history: Sequence[Item]) -> bool:
    """Whether this turn likely hunts: the analyst's words ask for one, or the last tool call made was a hunt."""
    if _HUNTING_WORDS.search(text):
        return True
    last = next((m for m in reversed(history) if isinstance(m, ModelMessage) and m.tool_calls), None)
    return last is not None and any(call.name == HUNT_TOOL for call in last.tool_calls)
