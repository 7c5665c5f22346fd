from __future__ import annotations

import pytest

from bot.commands.parser import Command, CommandError, apply_preferences, parse, with_preferences


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


@pytest.mark.parametrize("text", ["incidents 90d", "alerts critical", "trend last_2y", "incident"])
def test_malformed_commands_show_usage(text: str) -> None:
    with pytest.raises(CommandError, match="Usage"):
        parse(text)


def test_preferences_fill_in_what_a_command_leaves_out() -> None:
    preferences: dict[str, str] = {}
    assert "prefer 7d" in apply_preferences(parse("prefer"), preferences)
    assert "time window last_7d" in apply_preferences(parse("prefer 7d medium"), preferences)
    assert preferences == {"time_window": "last_7d", "min_severity": "Medium"}
    assert with_preferences(parse("incidents"), preferences) == preferences
    assert with_preferences(parse("incidents 1h"), preferences) == {"time_window": "last_1h", "min_severity": "Medium"}
    assert with_preferences(parse("incident 42"), preferences) == {"incident_ref": 42}
    assert apply_preferences(parse("prefer reset"), preferences) == "Preferences cleared." and preferences == {}
    with pytest.raises(CommandError):
        parse("prefer 90d")


@pytest.mark.parametrize(("text", "tool", "arguments"), [
    ("assign [2] to me", "assign_incident", {"incident_ref": "[2]", "assignee": "me"}),
    ("Assign #42 to Alice@Contoso.com", "assign_incident", {"incident_ref": "42", "assignee": "Alice@Contoso.com"}),
    ("close [3] false positive: pen test by the Red Team", "set_incident_status",
     {"incident_ref": "[3]", "status": "Closed", "classification": "FalsePositive", "comment": "pen test by the Red Team"}),
    ("close incident 42 as FP inaccurate data - bad geo feed", "set_incident_status",
     {"incident_ref": "42", "status": "Closed", "classification": "FalsePositive",
      "classification_reason": "InaccurateData", "comment": "bad geo feed"}),
    ("resolve 42 benign because admin script", "set_incident_status",
     {"incident_ref": "42", "status": "Closed", "classification": "BenignPositive", "comment": "admin script"}),
    ("reopen [3]", "set_incident_status", {"incident_ref": "[3]", "status": "Active"}),
    ("status 42 new", "set_incident_status", {"incident_ref": "42", "status": "new"}),
    ("severity [2] high", "set_incident_severity", {"incident_ref": "[2]", "severity": "high"}),
    ("raise [2] to High", "set_incident_severity", {"incident_ref": "[2]", "severity": "High"}),
    ("comment [2]: Called the user; MFA reset", "add_incident_comment",
     {"incident_ref": "[2]", "comment": "Called the user; MFA reset"}),
])
def test_change_commands_keep_the_analysts_words(text: str, tool: str, arguments: dict) -> None:
    assert parse(text) == Command("change", tool, arguments)


@pytest.mark.parametrize(("text", "message"), [
    ("close 42", "Which classification?"),
    ("close 42 false positive", "Closing needs a short reason"),
    ("close [3] bogus: x", "Which classification?"),
    ("close 42 false positive sideways: x", 'could not read "sideways"'),
    ("comment [2]", "What should the comment say?"),
    ("assign", "Usage: assign [n] to me"),
    ("close", "Usage: close [n]"),
])
def test_incomplete_change_commands_show_their_usage(text: str, message: str) -> None:
    with pytest.raises(CommandError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse(text)


@pytest.mark.parametrize("text", ["assign it to me", "close the incident please", "can you comment on [2]?"])
def test_change_requests_in_plain_words_go_to_the_model(text: str) -> None:
    assert parse(text) is None or parse(text).name != "change"


@pytest.mark.parametrize(("text", "kinds"), [
    ("who owns [2]?", set()), ("what is the severity of [2]?", set()), ("any closed incidents this week?", set()),
    ("what high-severity incidents came in?", set()), ("what do the comments on [2] say?", set()),
    ("please assign [1] to me", {"assign"}), ("take it", {"assign"}), ("raise [2] to high", {"severity"}),
    ("close [3] as a false positive, pen test", {"status"}), ("mark [2] as benign", {"status"}),
    ("add a note to [2] that we called the user", {"comment"}),
])
def test_only_verbs_of_change_let_the_model_propose_a_change(text: str, kinds: set[str]) -> None:
    from bot.orchestrator.write_guard import asked_for

    assert {kind.value for kind in asked_for(text)} == kinds
