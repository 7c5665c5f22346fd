from __future__ import annotations

import pytest

from bot.sentinel import kql
from bot.sentinel.params import (
    MAX_TITLE_SEARCH_LENGTH,
    TACTICS,
    IncidentRef,
    InvalidParameter,
    Severity,
    TimeWindow,
    parse_classification,
    parse_incident_ref,
    parse_limit,
    parse_product,
    parse_severity,
    parse_tactic,
    parse_time_window,
)
from bot.sentinel.queries import entity_value, make_query


@pytest.mark.parametrize("value", [42, "42", " 42 ", "#42", "incident 42", "Incident #42", 42.0])
def test_incident_numbers_in_any_usual_form(value: object) -> None:
    assert parse_incident_ref(value) == IncidentRef(number=42)


def test_a_portal_links_ids_name_the_incident() -> None:
    guid = "6A7F098B-D03D-49EC-9134-6C60C547D83C"
    assert parse_incident_ref(f" {guid} ") == IncidentRef(name=guid.lower())
    assert parse_incident_ref("defender:14431") == IncidentRef(provider_id="14431")
    assert parse_incident_ref("defender:14431x") == IncidentRef(title_search="defender:14431x")
    assert parse_incident_ref(guid + "0") == IncidentRef(title_search=guid + "0")


@pytest.mark.parametrize("value", ["phishing", "42 failed sign-ins", "[2]", "incident forty-two"])
def test_other_text_is_a_title_search(value: str) -> None:
    assert parse_incident_ref(value) == IncidentRef(title_search=value)


@pytest.mark.parametrize("value", [None, "", "   ", True, 0, -5, 2**31, 4.5, [42], {"n": 1}])
def test_bad_incident_refs_are_refused_clearly(value: object) -> None:
    with pytest.raises(InvalidParameter) as caught:
        parse_incident_ref(value)
    assert caught.value.name == "incident_ref"


def test_title_search_length_is_limited() -> None:
    parse_incident_ref("x" * MAX_TITLE_SEARCH_LENGTH)
    with pytest.raises(InvalidParameter, match="incident number"):
        parse_incident_ref("x" * (MAX_TITLE_SEARCH_LENGTH + 1))


def test_enums_accept_any_case_and_name_the_allowed_values() -> None:
    assert parse_time_window("LAST_7D") is TimeWindow.LAST_7D
    assert parse_severity("medium") is Severity.MEDIUM
    assert parse_severity(None) is Severity.INFORMATIONAL
    with pytest.raises(InvalidParameter, match="last_1h, last_24h, last_3d, last_7d, last_14d, last_30d"):
        parse_time_window("yesterday")
    with pytest.raises(InvalidParameter, match="High, Medium, Low, Informational"):
        parse_severity("Critical")


@pytest.mark.parametrize("value, expected", [(None, 20), (5, 5), ("7", 7), (100, 100), (3.0, 3)])
def test_limits(value: object, expected: int) -> None:
    assert parse_limit(value) == expected


@pytest.mark.parametrize("value", [0, 101, -1, "ten", True, 2.5, "1e9"])
def test_limits_out_of_range(value: object) -> None:
    with pytest.raises(InvalidParameter, match="limit"):
        parse_limit(value)


def test_severity_threshold_includes_more_severe() -> None:
    assert Severity.MEDIUM.at_least() == (Severity.HIGH, Severity.MEDIUM)
    assert kql.severity_list(Severity.LOW) == '("High", "Medium", "Low")'


def test_unknown_parameters_are_named() -> None:
    with pytest.raises(InvalidParameter, match="its parameters are: time_window, min_severity, limit"):
        make_query("get_top_entities", {"severity": "High"})
    with pytest.raises(InvalidParameter, match="query_alerts has no parameter 'owner'"):
        make_query("query_alerts", {"owner": "alice"})
    with pytest.raises(InvalidParameter, match="required"):
        make_query("get_incident_detail", {})
    with pytest.raises(InvalidParameter, match="not one of"):
        make_query("delete_everything", {})


def test_trend_bins_are_capped() -> None:
    assert make_query("get_alert_trend", {"time_window": "last_3d"}).bin_size.value == "1h"
    assert make_query("get_alert_trend", {"time_window": "last_7d"}).bin_size.value == "1d"
    assert make_query("get_alert_trend", {"time_window": "last_14d", "bin_size": "1h"}).bin_size.value == "1h"
    with pytest.raises(InvalidParameter, match="bin_size"):
        make_query("get_alert_trend", {"time_window": "last_30d", "bin_size": "1h"})


@pytest.mark.parametrize(
    "text, literal",
    [
        ("plain", '"plain"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("back\\slash", '"back\\\\slash"'),
        ("two\nlines", '"two\\nlines"'),
        ("esc\x1b", '"esc\ufffd"'),
        ("ünï 🙂", '"ünï 🙂"'),
    ],
)
def test_string_literal_escaping(text: str, literal: str) -> None:
    assert kql.string_literal(text) == literal


@pytest.mark.parametrize(
    "entity, value",
    [
        ({"Type": "account", "Name": "alice", "UPNSuffix": "contoso.com"}, "alice@contoso.com"),
        ({"Type": "account", "Name": "svc-backup"}, "svc-backup"),
        ({"Type": "account", "AadUserId": "0f6c"}, "0f6c"),
        ({"Type": "host", "HostName": "WS-FIN-023", "DnsDomain": "contoso.com"}, "WS-FIN-023"),
        ({"Type": "ip", "Address": "203.0.113.7"}, "203.0.113.7"),
        ({"Type": "registry-key", "Hive": "HKEY_CURRENT_USER", "Key": "Run"}, "HKEY_CURRENT_USER\\Run"),
        ({"$ref": "16"}, None),
        ({"Type": "process", "ProcessId": "4764"}, None),
        ({"Type": "ip", "Address": ""}, None),
        ("not an object", None),
    ],
)
def test_entity_values(entity: object, value: str | None) -> None:
    assert entity_value(entity) == value


@pytest.mark.parametrize("value, tactic", [
    ("CredentialAccess", "CredentialAccess"), ("credential access", "CredentialAccess"),
    (" Command and Control ", "CommandAndControl"), ("lateral_movement", "LateralMovement"),
    ("privilege-escalation", "PrivilegeEscalation"), (None, None), ("  ", None),
])
def test_tactics_in_any_case_and_spacing(value: object, tactic: str | None) -> None:
    assert parse_tactic(value) == tactic


@pytest.mark.parametrize("value", ["Credential", "T1110", "Unknown", "credential\naccess | where 1==1", 3, ["Impact"]])
def test_unknown_tactics_are_refused_with_the_valid_names(value: object) -> None:
    with pytest.raises(InvalidParameter, match="tactic") as refused:
        parse_tactic(value)
    assert all(name in str(refused.value) for name in TACTICS)


def test_classifications() -> None:
    assert parse_classification("true positive") == "TruePositive"
    assert parse_classification("FALSE_POSITIVE") == "FalsePositive"
    assert parse_classification("benign positive") == "BenignPositive"
    assert parse_classification("undetermined") == "Undetermined"
    assert parse_classification(None) is None
    with pytest.raises(InvalidParameter, match="TruePositive, FalsePositive, BenignPositive, Undetermined"):
        parse_classification("malicious")


def test_product_names() -> None:
    assert parse_product("  Defender for Endpoint ") == "Defender for Endpoint"
    assert parse_product(None) is None
    assert parse_product('x" | where 1==1 //') == 'x" | where 1==1 //'  # kept, as one escaped literal later
    for value, words in (("", "empty"), ("   ", "empty"), ("p" * 101, "at most 100"), (7, "not text"),
                         ("Defender\nfor Endpoint", "control characters"), ("a\x00b", "control characters"),
                         ("a\x85b", "control characters")):
        with pytest.raises(InvalidParameter, match=words):
            parse_product(value)
