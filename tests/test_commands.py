from __future__ import annotations

import pytest

from bot.tools.commands import Command, CommandError, parse


@pytest.mark.parametrize(
    "text, command",
    [
        ("help", Command("help")),
        ("/clear", Command("clear")),
        ("incidents", Command("incidents", "query_incidents", {})),
        ("Incidents 24h HIGH", Command("incidents", "query_incidents", {"time_window": "last_24h", "min_severity": "High"})),
        ("incidents high 7d 5", Command("incidents", "query_incidents",
                                        {"min_severity": "High", "time_window": "last_7d", "limit": 5})),
        ("alerts 1h", Command("alerts", "query_alerts", {"time_window": "last_1h"})),
        ("trend 30d medium", Command("trend", "get_alert_trend", {"time_window": "last_30d", "min_severity": "Medium"})),
        ("top entities", Command("entities", "get_top_entities", {})),
        ("incident 42", Command("incident", "get_incident_detail", {"incident_ref": 42})),
        ("incident #42", Command("incident", "get_incident_detail", {"incident_ref": 42})),
        ("details [2]", Command("incident", "get_incident_detail", reference=2)),
    ],
)
def test_commands(text: str, command: Command) -> None:
    assert parse(text) == command


@pytest.mark.parametrize(
    "text",
    ["what high-severity incidents came in overnight?", "tell me more about [2]", "alerts from yesterday please",
     "incidents involving alice", "", "   ", "42"],
)
def test_questions_are_left_for_the_model(text: str) -> None:
    assert parse(text) is None


@pytest.mark.parametrize("text", ["incidents 90d", "alerts critical", "trend last_2y"])
def test_malformed_commands_show_usage(text: str) -> None:
    with pytest.raises(CommandError, match="Usage"):
        parse(text)
