"""A tool carries its behaviour: what the terminal prints for its result and what a Teams answer suggests asking next
come from the tool's own declaration (a tool declared and registered only in this test), with no surface touched; a
tool that declares neither prints its compact text and suggests nothing. The architecture test holds the other half:
no surface module spells a tool's name."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime

import pytest

from bot.cards.common import Element, card, header
from bot.orchestrator.references import References, RefKind
from bot.sentinel.models import QueryMetadata, QueryResult
from bot.teams.replies import next_questions
from bot.terminal.render import render
from bot.tools.compact import RefFor
from bot.tools.registry import TOOLS
from bot.tools.tool import Tool
from tests.conftest import NOW


@dataclass(frozen=True)
class ProductCount:
    product: str
    alerts: int


def _text(result: QueryResult, ref_for: RefFor) -> str:
    return "products: " + ", ".join(f"{p.product}={p.alerts}" for p in result.records)


def _card(result: QueryResult, ref_for: RefFor, now: datetime, changes: bool = False) -> Element:
    return card(header("Alerts per product", demo=True))


def _terminal(result: QueryResult, ref_for: RefFor, now: datetime | None) -> str:
    return "\n".join(f"{p.product:<12}{p.alerts:>4}" for p in result.records)


def _follow_ups(result: QueryResult, ref_for: RefFor) -> list[str]:
    first = result.records[0]
    n = ref_for("entity", f"product:{first.product}")
    return [f"Which alerts came from [{n}]?" if n else f"Which alerts came from {first.product}?",
            "Show the alert trend for the last 7 days"]


TOOL = Tool("count_alert_products", "Alert counts per product.", (), "Counting alerts per product...", "{}",
            text=_text, card=_card, terminal=_terminal, terminal_empty=lambda result: "No product raised an alert.",
            follow_ups=_follow_ups)
BARE = replace(TOOL, name="count_alert_products_bare", terminal=None, terminal_empty=None, follow_ups=None)


@pytest.fixture
def registered() -> Iterator[None]:
    TOOLS.add(TOOL)
    TOOLS.add(BARE)
    try:
        yield
    finally:
        TOOLS.remove(TOOL.name)
        TOOLS.remove(BARE.name)


def result_of(tool: Tool, *records: ProductCount) -> QueryResult:
    return QueryResult(records, QueryMetadata(tool.name, {"time_window": "last_7d"}, len(records), len(records), False,
                                              3.0, "", "P7D", "demo"))


def nobody(kind: str, key: str) -> int | None:
    return None


def test_the_terminal_prints_a_result_as_its_tool_declares(registered: None) -> None:
    printed = render(result_of(TOOL, ProductCount("Defender", 12), ProductCount("Entra ID", 3)), nobody, NOW)
    assert printed.splitlines()[:2] == ["Defender      12", "Entra ID       3"]
    assert "Source: count_alert_products(time_window=last_7d) on demo workspace, 2 rows" in printed
    assert render(result_of(TOOL), nobody, NOW).splitlines()[0] == "No product raised an alert."


def test_a_tool_without_terminal_text_prints_what_the_model_reads(registered: None) -> None:
    printed = render(result_of(BARE, ProductCount("Defender", 12)), nobody, NOW, with_footer=False)
    assert printed == "products: Defender=12"
    empty = render(result_of(BARE), nobody, NOW, with_footer=False)
    assert empty.startswith("Nothing matched in the last 7 days") and "No product" not in empty


def test_a_teams_answer_suggests_its_tools_follow_ups(registered: None) -> None:
    references = References()
    n = references.assign(RefKind.ENTITY, "product:Defender", "Defender")
    found = result_of(TOOL, ProductCount("Defender", 12))
    again = result_of(TOOL, ProductCount("Entra ID", 3))
    assert next_questions([found], references) == [f"Which alerts came from [{n}]?",
                                                   "Show the alert trend for the last 7 days"]
    # Each result's own questions, repeated ones once, at most three; none for a tool without any or for no rows.
    assert next_questions([found, again, result_of(BARE, ProductCount("x", 1)), result_of(TOOL)], References()) == [
        "Which alerts came from Defender?", "Show the alert trend for the last 7 days",
        "Which alerts came from Entra ID?"]
    assert next_questions([result_of(BARE, ProductCount("Defender", 12))], references) == []
