"""The deterministic assessment of an investigated entity: named signals, each with its weight and the evidence rows
it rests on, and a level from their summed weight. Computed by the bot from the typed evidence (never by the model,
which only narrates it). Pure: no I/O, no clock (validity "now" is the service's, read with the indicators).

The weights follow the attack, not the count: what an attacker's own step shows (credential dumping, ransomware's
recovery sabotage, a push accepted after an MFA flood, contact with a listed counterparty) is HIGH on its own (60);
what only corroborates (an alert's severity, a new country, UEBA) adds a little; detections an analyst already
closed as false or benign positive count nothing.

Signals and weights (the first match of a signal's rules counts; a signal counts once):

- threat_intel_match: a valid indicator (active, not revoked, in its validity) of the entity: 50 at confidence
  >= 80, 35 at >= 50, else 15.
- counterparty_intel: a valid indicator of a counterparty the entity's rows touched (``counterparties``: an address,
  domain or URL it connected to, signed in from or clicked through to, a hash it ran or wrote, a sender that mailed
  it), citing the indicator and the rows: contact (a connection made, a click let through, a hash run or written)
  at confidence >= 50: 60 (alone high), below 30; a successful sign-in or logon from it: 35; a delivered message: 25;
  an attempt (a failed, blocked or inbound connection, a failed sign-in; a risk detection's or UEBA activity's
  address): 10.
- risky_user: Entra ID Protection's risk state: 50 confirmedCompromised; atRisk 35 high, 20 medium, 10 low.
- risk_detections: high-level risk detections of the account or IP: 15.
- mfa_fatigue: >= 5 MFA denials (result 500121): 30; 60 (alone high) when a successful sign-in from an IP the
  denials came from follows the first denial (the push accepted).
- new_country: a successful sign-in from a country the account had no successful sign-in from in the 14 days before
  the window (its baseline), for an account that had some there (else nothing to compare with): 15.
- privileged_role: "Add member to role" (or eligible) for the account: 35 for an admin role, else 25 ("New role").
- technique_alerts: alerts (High or Medium) whose techniques are credential dumping (T1003, LSASS access) or
  ransomware (T1486 data encrypted, T1490 recovery inhibited), or High alerts of the CommandAndControl tactic (the
  malware running and calling out): 60 (alone high).
- high_severity_alerts: High-severity alerts naming the entity (other than technique_alerts'): 25 (else
  medium_severity_alerts: 10).
- malicious_process: a process matching a known-bad pattern (PROCESS_PATTERNS: encoded PowerShell, credential
  dumping, shadow copy deletion, LOLBin download, download cradle, Defender tampering, log clearing, recovery
  disabled, coin miner; Office spawning a shell): 60 (alone high) for credential dumping, shadow copy deletion and
  recovery disabled (STANDALONE_PATTERNS), else 30.
- mass_renames: at least MASS_RENAMES file renames among the file rows (ransomware encrypting): 60 (alone high).
- malicious_click: a click on a URL with threats: 30 clicked through, 10 blocked.
- malicious_email: a delivered message with threats: 15.
- ueba_priority: a UEBA activity with investigation priority >= 5: 10.
- attack_chain: steps of one attack across sections, stronger than the parts: an alert naming a process (by its
  command line, file or hash) that the process rows hold and that connected out: 20; a new admin role for an account
  that signed in from a new country: 25.

Alerts closed as not an attack count nothing (technique_alerts, high/medium_severity_alerts, the chain's alert): an
alert whose incidents were all closed as FalsePositive or BenignPositive (``evidence_alert_incidents``, asked in the
second round when an incident naming the entity was closed so); when that look-up failed, all of them when every
incident naming the entity (all read) was closed so.

Not about an IP (NOT_ABOUT): malicious_click (the address the victim clicked from), new_country and
counterparty_intel (what the people and devices behind the address touched).

Level by score: 0 none, 1-24 low, 25-59 medium, 60 and above high.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from bot.investigation.counterparties import TOOL as COUNTERPARTY_TOOL
from bot.investigation.counterparties import Touch, touched
from bot.investigation.models import Assessment, Level, Section, Signal
from bot.sentinel.evidence import (
    AlertIncident,
    BehaviorEvent,
    DirectoryChange,
    EmailMessage,
    FileEvent,
    Indicator,
    NetworkEvent,
    ProcessEvent,
    RiskDetection,
    RiskyUser,
    SigninGroup,
    UrlClick,
)
from bot.sentinel.models import AlertSummary, Incident
from bot.sentinel.queries.evidence.signins import BASELINE

# Signals that say nothing about an entity of this kind: a click's IP is where its victim clicked from, an IP's
# country never changes (a new country is an account's), and what an address's rows touched is what the devices and
# people behind it touched (a victim's home address is not bad for the phishing site its owner opened).
NOT_ABOUT = {"ip": frozenset({"malicious_click", "new_country", "counterparty_intel"})}
LEVELS = ((60, Level.HIGH), (25, Level.MEDIUM), (1, Level.LOW))
MAX_CITED = 8
MFA_FATIGUE_DENIALS = 5
UEBA_PRIORITY = 5
ALONE = 60  # a signal that is enough for high on its own
MASS_RENAMES = 20
# Techniques an alert names that carry on their own: credential dumping (LSASS access), ransomware.
STANDALONE_TECHNIQUES = {"T1003": "credential dumping", "T1486": "ransomware", "T1490": "ransomware"}
# The title of technique_alerts by the most telling kind matched (fact check: "credential dumping" is backed by it).
ALERT_KINDS = {"credential dumping": "Credential dumping alerts", "ransomware": "Ransomware alerts",
               "command and control": "Command-and-control alerts"}
BENIGN_CLASSIFICATIONS = frozenset({"falsepositive", "benignpositive"})
# Process patterns (MITRE ATT&CK technique in the name): command line or file name, case-insensitive.
PROCESS_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple((name, re.compile(pattern, re.IGNORECASE)) for
                                                                  name, pattern in (
    ("encoded PowerShell (T1059.001)", r"powershell(\.exe)?\b.*\s-(e|en|enc|enco|encodedcommand)\s"),
    ("credential dumping (T1003)", r"mimikatz|sekurlsa|procdump.*lsass|comsvcs(\.dll)?.*minidump"),
    ("shadow copy deletion (T1490)", r"vssadmin(\.exe)?\s+delete\s+shadows|wmic.*shadowcopy\s+delete"),
    ("LOLBin download (T1105)", r"certutil(\.exe)?.*-urlcache|bitsadmin(\.exe)?.*/transfer"),
    ("download cradle (T1059.001)", r"iex\s*\(?\s*\(?new-object\s+net\.webclient|downloadstring\("),
    ("defender tampering (T1562.001)", r"set-mppreference\s+-disable|disableantispyware|windows defender.*disable"),
    ("log clearing (T1070.001)", r"wevtutil(\.exe)?\s+cl\b"),
    ("recovery disabled (T1490)", r"bcdedit(\.exe)?.*recoveryenabled\s+no"),
    ("coin miner (T1496)", r"xmrig|minexmr|stratum\+tcp"),
))
STANDALONE_PATTERNS = frozenset({"credential dumping (T1003)", "shadow copy deletion (T1490)",
                                 "recovery disabled (T1490)"})
_OFFICE = re.compile(r"^(winword|excel|powerpnt|outlook)\.exe$", re.IGNORECASE)
_SHELL = re.compile(r"^(cmd|powershell|pwsh|wscript|cscript|mshta|rundll32|regsvr32)\.exe$", re.IGNORECASE)


def assess(sections: Iterable[Section], kind: str = "") -> Assessment:
    """The signals the evidence holds about an entity of ``kind`` and the level their weights sum to."""
    by_name = {s.name: s for s in sections}
    # A signal names at most MAX_CITED rows (its detail counts them all), so the rows cited can all be shown.
    signals = [replace(signal, evidence=signal.evidence[:MAX_CITED]) for rule in RULES
               if (signal := rule(by_name)) is not None and signal.name not in NOT_ABOUT.get(kind, ())]
    score = sum(s.weight for s in signals)
    level = next((lvl for floor, lvl in LEVELS if score >= floor), Level.NONE)
    return Assessment(level, score, tuple(signals))


Sections = dict[str, Section]


def _rows(sections: Sections, name: str, kind: type) -> list[tuple[str, Any]]:
    """(evidence ref, record) of one section's rows of ``kind``."""
    section = sections.get(name)
    if section is None:
        return []
    return [(section.ref(i), r) for i, r in enumerate(section.records) if isinstance(r, kind)]


def _threat_intel(sections: Sections) -> Signal | None:
    valid = [(ref, r) for ref, r in _rows(sections, "evidence_threat_intel", Indicator) if r.valid]
    if not valid:
        return None
    best = max(r.confidence for _, r in valid)
    weight = 50 if best >= 80 else 35 if best >= 50 else 15
    return Signal("threat_intel_match", "Threat-intelligence match", weight,
                  f"{len(valid)} valid indicator(s), highest confidence {best}", tuple(ref for ref, _ in valid))


def _risky_user(sections: Sections) -> Signal | None:
    for ref, user in _rows(sections, "evidence_risky_user", RiskyUser):
        state, level = user.risk_state.lower(), user.risk_level.lower()
        weight = 50 if state == "confirmedcompromised" else \
            {"high": 35, "medium": 20, "low": 10}.get(level, 0) if state == "atrisk" else 0
        if weight:
            return Signal("risky_user", "Risky user", weight, f"risk state {user.risk_state}, level {user.risk_level}",
                          (ref,))
    return None


def _risk_detections(sections: Sections) -> Signal | None:
    high = [(ref, r) for ref, r in _rows(sections, "evidence_risk_detections", RiskDetection)
            if r.risk_level.lower() == "high"]
    if not high:
        return None
    kinds = ", ".join(sorted({r.event_type for _, r in high}))
    return Signal("risk_detections", "High-risk detections", 15, f"{len(high)} high-level detection(s): {kinds}",
                  tuple(ref for ref, _ in high))


def _mfa_fatigue(sections: Sections) -> Signal | None:
    groups = _rows(sections, "evidence_signins", SigninGroup)
    denied = [(ref, g) for ref, g in groups if g.mfa_denied]
    denials = sum(g.count for _, g in denied)
    if denials < MFA_FATIGUE_DENIALS:
        return None
    # The push finally accepted: a success from an IP the denied pushes came from, after the first denial.
    first_denial = min((g.first for _, g in denied if g.first), default=None)
    pushed_from = {g.ip for _, g in denied}
    after = [(ref, g) for ref, g in groups if g.succeeded and g.ip in pushed_from and first_denial and g.last
             and g.last > first_denial]
    detail = f"{denials} MFA denials (result {denied[0][1].result_type}) from {', '.join(sorted(pushed_from)[:3])}"
    if after:
        detail += f", then {sum(g.count for _, g in after)} successful sign-in(s) from there"
    return Signal("mfa_fatigue", "MFA-fatigue pattern", ALONE if after else 30, detail,
                  tuple(ref for ref, _ in denied + after))


def _new_country(sections: Sections) -> Signal | None:
    """Successful sign-ins from a country the account had none from in the baseline before the window. An account
    with no successful sign-in in the baseline has no known countries to compare with: no signal (new to whom?)."""
    successes = [(ref, g) for ref, g in _rows(sections, "evidence_signins", SigninGroup) if g.succeeded and g.country]
    with_baseline = {g.upn.lower() for _, g in successes if g.known_country}
    new = [(ref, g) for ref, g in successes if not g.known_country and g.upn.lower() in with_baseline]
    if not new:
        return None
    countries = ", ".join(sorted({g.country for _, g in new}))
    return Signal("new_country", "Sign-ins from a new country", 15,
                  f"{sum(g.count for _, g in new)} successful sign-in(s) from {countries} (none from there in the "
                  f"{BASELINE.days} days before the window)", tuple(ref for ref, _ in new))


def _privileged_role(sections: Sections) -> Signal | None:
    added = [(ref, c) for ref, c in _rows(sections, "evidence_directory", DirectoryChange)
             if "member to role" in c.operation.lower() and not c.by_entity]
    if not added:
        return None
    roles = sorted({c.role for _, c in added if c.role})
    admin = any("admin" in role.lower() for role in roles)
    return Signal("privileged_role", "New privileged role" if admin else "New role", 35 if admin else 25,
                  f"added to {', '.join(roles) or 'a role'}", tuple(ref for ref, _ in added))


def closed_benign(incident: Incident) -> bool:
    """Closed as false or benign positive: an analyst judged the detection not an attack."""
    return incident.status.lower() == "closed" and (incident.classification or "").lower() in BENIGN_CLASSIFICATIONS


def _counted_alerts(sections: Sections) -> list[tuple[str, AlertSummary]]:
    """The alerts naming the entity that count: not those whose incidents were all closed as false or benign
    positive (``evidence_alert_incidents``; an alert in no incident, or in an open or true-positive one, counts).
    Without that section (not asked, or failed): none when every incident naming the entity (all of them read) was
    closed so, else all."""
    alerts = _rows(sections, "query_alerts", AlertSummary)
    mapped = sections.get("evidence_alert_incidents")
    if mapped is not None and not mapped.error:
        benign: dict[str, bool] = {}
        for row in mapped.records:
            if isinstance(row, AlertIncident):
                benign[row.alert_id] = benign.get(row.alert_id, True) and row.closed_benign
        return [(ref, a) for ref, a in alerts if not benign.get(a.alert_id, False)]
    incidents = sections.get("query_incidents")
    if incidents is None or incidents.error or not incidents.records or incidents.total > len(incidents.records):
        return alerts
    every = all(isinstance(i, Incident) and closed_benign(i) for i in incidents.records)
    return [] if every else alerts


def _technique_alerts(sections: Sections) -> Signal | None:
    matched = [(ref, a, what) for ref, a in _counted_alerts(sections) if (what := _standalone_alert(a))]
    if not matched:
        return None
    kinds = sorted({w for _, _, w in matched}, key=list(ALERT_KINDS).index)
    names = ", ".join(sorted({a.name for _, a, _ in matched})[:3])
    return Signal("technique_alerts", ALERT_KINDS[kinds[0]], ALONE,
                  f"{len(matched)} alert(s) of {', '.join(kinds)}: {names}", tuple(ref for ref, _, _ in matched))


def _standalone_alert(alert: AlertSummary) -> str:
    """What an alert declares that carries on its own: a technique of STANDALONE_TECHNIQUES (High or Medium), or
    command and control at High severity (the malware running and calling out); "" otherwise."""
    if alert.severity not in ("High", "Medium"):
        return ""
    for technique in alert.techniques:
        what = STANDALONE_TECHNIQUES.get(technique.upper().split(".")[0], "")
        if what:
            return what
    if alert.severity == "High" and any(t.lower() == "commandandcontrol" for t in alert.tactics):
        return "command and control"
    return ""


def _alerts(sections: Sections) -> Signal | None:
    alerts = [(ref, a) for ref, a in _counted_alerts(sections) if not _standalone_alert(a)]  # each alert counts once
    for severity, name, weight in (("High", "high_severity_alerts", 25), ("Medium", "medium_severity_alerts", 10)):
        matched = [(ref, a) for ref, a in alerts if a.severity == severity]
        if matched:
            names = ", ".join(sorted({a.name for _, a in matched})[:3])
            return Signal(name, f"{severity}-severity alerts", weight, f"{len(matched)} alert(s): {names}",
                          tuple(ref for ref, _ in matched))
    return None


def _process_pattern(event: ProcessEvent) -> str | None:
    text = f"{event.file_name} {event.command_line} "
    for name, pattern in PROCESS_PATTERNS:
        if pattern.search(text):
            return name
    if _OFFICE.match(event.parent) and _SHELL.match(event.file_name):
        return "Office spawning a shell (T1566)"
    return None


def _malicious_process(sections: Sections) -> Signal | None:
    matched = [(ref, e, name) for ref, e in _rows(sections, "evidence_processes", ProcessEvent)
               if (name := _process_pattern(e))]
    if not matched:
        return None
    # The patterns that carry on their own first, so the detail names what made the weight.
    matched.sort(key=lambda m: m[2] not in STANDALONE_PATTERNS)
    alone = matched[0][2] in STANDALONE_PATTERNS
    processes = ", ".join(list(dict.fromkeys(f"{e.file_name} ({name})" for _, e, name in matched))[:3])
    return Signal("malicious_process", "Malicious process", ALONE if alone else 30, processes,
                  tuple(ref for ref, _, _ in matched))


def _mass_renames(sections: Sections) -> Signal | None:
    renamed = [(ref, f) for ref, f in _rows(sections, "evidence_files", FileEvent)
               if f.action.lower() == "filerenamed"]
    if len(renamed) < MASS_RENAMES:
        return None
    return Signal("mass_renames", "Ransomware behaviour: mass file renames", ALONE,
                  f"{len(renamed)} files renamed", tuple(ref for ref, _ in renamed))


def _counterparty_intel(sections: Sections) -> Signal | None:
    """A valid indicator of a counterparty the entity's rows touched: weighted by how it was touched and how
    confident the indicator is; cites the indicators and the rows."""
    indicators = [(ref, i) for ref, i in _rows(sections, COUNTERPARTY_TOOL, Indicator) if i.valid]
    if not indicators:
        return None
    listed = {i.value.lower(): (ref, i) for ref, i in reversed(indicators)}  # the most confident of each value
    others = [s for name, s in sections.items() if name != COUNTERPARTY_TOOL]
    hits = [(t, *listed[t.value]) for t in touched(others) if t.value in listed]
    if not hits:
        return None

    def weight(touch: Touch, confidence: int) -> int:
        if touch is Touch.CONTACT:
            return ALONE if confidence >= 50 else 30
        return {Touch.SIGNIN: 35, Touch.MAIL: 25}.get(touch, 10)
    hits.sort(key=lambda h: -weight(h[0].touch, h[2].confidence))  # the telling ones first, cited first
    best = weight(hits[0][0].touch, hits[0][2].confidence)
    how = {Touch.CONTACT: "contacted", Touch.SIGNIN: "signed in from it", Touch.MAIL: "mailed it",
           Touch.ATTEMPT: "attempted"}
    named: dict[str, str] = {}
    for t, _, i in hits:  # each value once, as its most telling row touched it
        named.setdefault(i.value, f"{i.value} ({i.tags or i.key}, confidence {i.confidence}; {how[t.touch]} {t.ref})")
    evidence = dict.fromkeys(ref for t, ref, _ in hits for ref in (ref, t.ref))
    return Signal("counterparty_intel", "Threat-intelligence match of a counterparty", best,
                  "; ".join(list(named.values())[:3]), tuple(evidence))


def _chains(sections: Sections) -> Signal | None:
    """Steps of one attack across sections: an alert naming a process the rows hold that connected out; a new admin
    role for an account signing in from a new country."""
    steps: list[str] = []
    refs: list[str] = []
    processes = _rows(sections, "evidence_processes", ProcessEvent)
    connections = _rows(sections, "evidence_network", NetworkEvent)
    weight = 0
    for alert_ref, alert in _counted_alerts(sections):
        named = {label.split(": ", 1)[1].lower() for label in alert.entities if ": " in label}
        for process_ref, process in processes:
            if not named & {process.command_line.lower(), process.file_name.lower(), process.sha256.lower()} - {""}:
                continue
            out = [ref for ref, c in connections if c.process.lower() == process.file_name.lower()]
            if out:
                steps.append(f"{alert.name} -> {process.file_name} -> its connection out")
                refs += [alert_ref, process_ref, out[0]]
                weight = 20
                break
        if weight:
            break
    role, country = _privileged_role(sections), _new_country(sections)
    if role is not None and country is not None and role.title == "New privileged role":
        steps.append(f"{role.detail} and a sign-in from a new country")
        refs += [*role.evidence[:2], *country.evidence[:2]]
        weight += 25
    if not steps:
        return None
    return Signal("attack_chain", "Attack chain", weight, "; ".join(steps), tuple(dict.fromkeys(refs)))


def _malicious_click(sections: Sections) -> Signal | None:
    threats = [(ref, c) for ref, c in _rows(sections, "evidence_url_clicks", UrlClick) if c.threat_types]
    through = [(ref, c) for ref, c in threats if c.clicked_through or c.action.lower() == "clickallowed"]
    chosen = through or threats
    if not chosen:
        return None
    urls = ", ".join(sorted({c.url for _, c in chosen})[:2])
    return Signal("malicious_click", "Click on a malicious URL" if through else "Blocked click on a malicious URL",
                  30 if through else 10, urls, tuple(ref for ref, _ in chosen))


def _malicious_email(sections: Sections) -> Signal | None:
    delivered = [(ref, m) for ref, m in _rows(sections, "evidence_email", EmailMessage)
                 if m.threat_types and m.delivery_action.lower() == "delivered"]
    if not delivered:
        return None
    return Signal("malicious_email", "Malicious email delivered", 15,
                  f"{len(delivered)} message(s) with {', '.join(sorted({m.threat_types for _, m in delivered}))}",
                  tuple(ref for ref, _ in delivered))


def _ueba(sections: Sections) -> Signal | None:
    high = [(ref, e) for ref, e in _rows(sections, "evidence_ueba", BehaviorEvent) if e.priority >= UEBA_PRIORITY]
    if not high:
        return None
    return Signal("ueba_priority", "UEBA anomalies", 10,
                  f"{len(high)} activit(ies), priority up to {max(e.priority for _, e in high)}",
                  tuple(ref for ref, _ in high))


RULES: tuple[Callable[[Sections], Signal | None], ...] = (
    _threat_intel, _counterparty_intel, _risky_user, _risk_detections, _mfa_fatigue, _new_country, _privileged_role,
    _technique_alerts, _alerts, _malicious_process, _mass_renames, _malicious_click, _malicious_email, _ueba, _chains,
)
