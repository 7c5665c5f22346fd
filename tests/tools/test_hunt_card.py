"""The hunt's card shows what the hunt was for: a join's own columns among the six a card holds (a mail's click and
its time, not only the mail's), a URL exactly as the record holds it (to copy), and a real number rounded for reading
(a series point's score) while the model's text keeps the value whole. Run on the demo workspace through the tool,
as a turn runs it."""

from __future__ import annotations

import json
import re
from typing import Any

from bot.cards.inert import ZERO_WIDTH_SPACE
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import QueryResult
from bot.tools.queries.hunt import card_cell
from bot.tools.registry import TOOLS
from bot.tools.toolbox import ToolBox
from tests.cards.test_cards import assert_valid, walk
from tests.conftest import NOW, SEED
from tests.support.demo import copied_demo

PROXIMITY = {"table": "EmailEvents", "time_window": "30d",
             "join": {"table": "UrlClickEvents", "on": ["NetworkMessageId", "NetworkMessageId"], "within": "10m",
                      "columns": ["Url", "TimeGenerated"]}}
SERIES = {"table": "SigninLogs", "time_window": "30d", "by": ["UserPrincipalName"], "series": {"step": "1h"}}


async def _run(arguments: dict[str, Any]) -> tuple[QueryResult, str, str]:
    box = ToolBox(SentinelClient(copied_demo(SEED, lambda: NOW)))
    run = await box.run("hunt", json.dumps(arguments))
    assert run.ok and isinstance(run.artifact, QueryResult) and run.artifact.records, run.artifact
    card = TOOLS.card(run.artifact, lambda kind, key: None, NOW)
    assert_valid(card)
    return run.artifact, json.dumps(card), TOOLS.text(run.artifact, lambda kind, key: None, run.arguments)


async def test_a_joins_own_columns_are_on_the_card() -> None:
    result, card, _ = await _run(PROXIMITY)
    first = result.records[0]
    nodes = list(walk(json.loads(card)))
    assert first.value("Url") in [n["text"] for n in nodes if n.get("type") == "TextRun"]  # as the record holds it
    assert not [n for n in nodes if ZERO_WIDTH_SPACE in str(n.get("text", ""))]  # nothing to strip when pasting it
    assert "RightTimeGenerated: " in card
    also = re.search(r"Also in the result: ([^\"]*)", card)
    assert also is None or ("Url" not in also.group(1).split(", ") and "RightTimeGenerated" not in also.group(1))


async def test_a_series_points_score_is_rounded_on_the_card_and_whole_in_the_text() -> None:
    result, card, text = await _run(SERIES)
    scores = [r.value("Score") for r in result.records]
    assert any(isinstance(s, float) and s != round(s, 2) for s in scores), scores[:5]
    assert re.findall(r"Score: (-?[0-9.e+-]+)", card)
    assert all(len(s.split(".")[-1]) <= 3 for s in re.findall(r"Score: (-?[0-9.e+-]+)", card))
    assert str(scores[0]) in text  # the model reads the value the record holds


def test_card_cells_round_reals_only() -> None:
    assert card_cell(1029.458314499307, "real") == "1029.46"
    assert card_cell(0.2112209685761194, "real") == "0.211"
    assert card_cell(2.5, "real") == "2.5" and card_cell(3.0, "real") == "3.0"
    assert card_cell(float("nan"), "real") == "nan"
    assert card_cell(1029, "long") == "1029" and card_cell("0.123456", "string") == "0.123456"
