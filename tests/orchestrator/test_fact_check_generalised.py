"""The fact check on wordings and records it was not first written for (issue 38): each rule derived from what the
records declare marks a lie at its span and leaves its correct twin alone."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bot.orchestrator.conversation import Conversation
from bot.orchestrator.factcheck import grounding
from bot.sentinel.evidence import EmailMessage, ProcessEvent, RiskyUser
from bot.sentinel.models import AlertSummary, HuntRow, Incident, OnCallEntry, QueryMetadata, QueryResult
from tests.conftest import NOW


def _remember(conversation: Conversation, tool: str, records: tuple[Any, ...],
              parameters: dict[str, Any] | None = None) -> Conversation:
    metadata = QueryMetadata(tool, parameters or {}, len(records), len(records), False, 1.0, "", "P7D", "demo")
    conversation.remember(QueryResult(records, metadata), NOW)  # type: ignore[arg-type]
    return conversation


def _marks(conversation: Conversation, text: str) -> list[str]:
    return [text[f.start:f.end] for f in grounding.check(text, conversation.facts, conversation.references, NOW)]


def _only_at(conversation: Conversation, text: str, value: str) -> bool:
    """Marked, and every mark over the false value (its first occurrence)."""
    start = text.index(value)
    found = grounding.check(text, conversation.facts, conversation.references, NOW)
    return bool(found) and all(f.start < start + len(value) and start < f.end for f in found)


def _alerts() -> Conversation:
    alerts = (AlertSummary("a1b2c3d4-0000-4000-8000-000000000001", "Impossible travel activity", "Medium", "New",
                           "Microsoft Entra ID Protection", NOW),
              AlertSummary("a1b2c3d4-0000-4000-8000-000000000002", "Suspicious access to LSASS service", "High",
                           "InProgress", "Microsoft Defender for Endpoint", NOW))
    return _remember(Conversation(), "query_alerts", alerts)


def test_an_alerts_severity_status_and_product_are_held_to_its_row() -> None:
    conversation = _alerts()
    for true in ("[1] Impossible travel activity fired with Medium severity.",
                 "[2] Suspicious access to LSASS service came from Microsoft Defender for Endpoint.",
                 "[2] Suspicious access to LSASS service is still InProgress.",
                 "### [1] Impossible travel activity\n- **Severity:** Medium\n- **Status:** New",
                 "| Alert | Severity |\n|---|---|\n| [1] Impossible travel activity | Medium |\n"
                 "| [2] Suspicious access to LSASS service | High |"):
        assert _marks(conversation, true) == [], true
    assert _only_at(conversation, "[1] Impossible travel activity fired with Low severity.", "Low")
    assert _only_at(conversation, "[2] Suspicious access to LSASS service came from Microsoft Defender for "
                                "Office 365.", "Microsoft Defender for Office 365")
    assert _only_at(conversation, "[2] Suspicious access to LSASS service is marked Resolved.", "Resolved")
    assert _only_at(conversation, "### [1] Impossible travel activity\n- **Status:** Dismissed", "Dismissed")
    assert _only_at(conversation, "| Alert | Severity |\n|---|---|\n| [1] Impossible travel activity | High |",
                    "High")


def test_an_incidents_alert_count_is_read_after_its_number() -> None:
    incident = Incident(14439, "Phishing", "Medium", "Active", None, NOW, NOW, 2, (), (), "https://x/14439", None)
    conversation = _remember(Conversation(), "query_incidents", (incident,))
    for true in ("Incident 14439 groups 2 alerts.", "2 alerts are grouped under incident 14439.",
                 "#14439 has 2 alerts and 3 entities."):
        assert _marks(conversation, true) == [], true
    assert _only_at(conversation, "Incident 14439 groups 5 alerts.", "5")
    assert _only_at(conversation, "3 alerts are grouped under Incident 14439.", "3")


def _hunt() -> Conversation:
    rows = (HuntRow((("Location", "DE"), ("Count", 156))), HuntRow((("Location", "CN"), ("Count", 36))),
            HuntRow((("Location", "BR"), ("Count", 8))))
    return _remember(Conversation(), "hunt", rows, {"table": "SigninLogs", "summarize": ["count()"],
                                                    "by": ["Location"]})


def test_a_hunt_groups_count_and_share_are_held_to_its_row_and_its_result() -> None:
    conversation = _hunt()  # 156 + 36 + 8 = 200: Germany 78%, China 18%, Brazil 4%
    for true in ("Germany had 156 sign-ins.", "China accounts for 18% of the total.",
                 "### Brazil\n- **Sign-ins:** 8\n- **Share:** 4%", "| Group | Share |\n|---|---|\n| China | 18% |",
                 "4% of the rows were attributed to Brazil.", "China accounts for about 20% of the total.",
                 "China accounts for over 10% of the total."):
        assert _marks(conversation, true) == [], true
    assert _only_at(conversation, "Germany had 166 sign-ins.", "166 sign-ins")
    assert _only_at(conversation, "China accounts for 8% of the total.", "8%")
    assert _only_at(conversation, "### Brazil\n- **Share:** 12%", "12%")
    assert _only_at(conversation, "| Group | Sign-ins |\n|---|---|\n| Germany | 9 |", "9")


def _processes() -> Conversation:
    rows = (ProcessEvent(NOW, "ws-legal-143", "adele", "outlook.exe", "outlook.exe", "explorer.exe", "ab" * 32),
            ProcessEvent(NOW, "ws-legal-143", "adele", "winword.exe", "winword.exe /n", "outlook.exe", "cd" * 32))
    return _remember(Conversation(), "evidence_processes", rows, {"entity": "ws-legal-143"})


def test_a_ticket_lines_field_label_after_a_dash_is_that_field_of_the_lines_subject() -> None:
    conversation = _processes()
    for true in ("Obs 1: OUTLOOK.EXE on WS-LEGAL-143 — parent process: explorer.exe",
                 "Note 2: winword.exe on ws-legal-143 — parent process: outlook.exe",
                 "Note: check ws-legal-143 for winword.exe launched by explorer.exe"):  # an instruction
        assert _marks(conversation, true) == [], true
    assert _only_at(conversation, "Obs 1: OUTLOOK.EXE on WS-LEGAL-143 — parent process: winword.exe",
                    "winword.exe")


def test_advice_under_a_label_is_not_a_claim() -> None:
    incident = Incident(14436, "Credential access", "Medium", "Active", None, NOW, NOW, 1, ("CredentialAccess",), (),
                        "https://x/14436", None)
    conversation = _remember(Conversation(), "query_incidents", (incident,))
    assert _marks(conversation, "### #14436\n- **Severity:** Medium\n\nNext step: pull the full timeline and check "
                                "for lateral movement.") == []
    assert _only_at(conversation, "### #14436\n- **Severity:** Medium\n- **Tactic:** Lateral Movement",
                    "Lateral Movement")


def test_a_risky_users_level_with_a_word_before_its_cue() -> None:
    conversation = _remember(Conversation(), "evidence_risky_users",
                             (RiskyUser("yuki.tanaka@contoso.com", "high", "atRisk", "", NOW),),
                             {"entity": "yuki.tanaka@contoso.com"})
    assert _marks(conversation, "yuki.tanaka@contoso.com is flagged at high user risk.") == []
    assert _only_at(conversation, "yuki.tanaka@contoso.com is flagged at low user risk.", "low")


def test_a_delivery_location_and_a_roster_location_are_read_as_the_rows_write_them() -> None:
    emails = (EmailMessage(NOW, "m-1", "billing@litware.example", "sam@contoso.com", "Invoice", "Delivered", "Inbox",
                           ""),
              EmailMessage(NOW, "m-2", "news@adatum.example", "kim@contoso.com", "News", "Blocked", "Quarantine", ""))
    conversation = _remember(Conversation(), "evidence_email", emails, {"entity": "sam@contoso.com"})
    start = datetime(2026, 11, 20, 8, tzinfo=UTC)
    roster = (OnCallEntry("Adele Vance", "adelev@contoso.com", "adelev@contoso.com", "+1 425 555 0100", "Dublin",
                          "Tier 2", start, start.replace(hour=16), True, NOW),
              OnCallEntry("Grace Okonkwo", "grace@contoso.com", "grace@contoso.com", "+1 425 555 0101", "Lagos",
                          "Tier 1", start, start.replace(hour=16), True, NOW))
    _remember(conversation, "get_on_call", roster)
    for true in ("The mail from billing@litware.example landed in the Inbox.", "Adele Vance is based in Dublin.",
                 "The mail from billing@litware.example was not sent to Quarantine."):
        assert _marks(conversation, true) == [], true
    assert _only_at(conversation, "The mail from billing@litware.example landed in Quarantine.", "Quarantine")
    assert _only_at(conversation, "Adele Vance is based in Lagos.", "Lagos")
