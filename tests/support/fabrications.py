"""A scripted model that calls the real tools and then answers with lies built from what they returned.

The fact check's measurement (tests/orchestrator/test_fact_check.py and bench/bench_fact_check.py): each ``Case`` is one
answer the scripted model gives after the same first round of real tool calls over the demo workspace.
Fabricated answers take real records and change one thing (a severity, an owner, a count, a host, a time,
a change that never happened); correct answers state the records as they are, in the wordings that used
to be flagged (counts, dates, percentages, "#1 priority", thousands separators). Nothing here is a fixed
number: every value comes from the results, so a change to the demo data keeps the cases meaningful.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.orchestrator.references import References
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import AlertSummary, EntityCount, Incident, IncidentDetail, QueryResult, TrendBin

# The first round the scripted model makes, before every answer.
CALLS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("query_incidents", {"time_window": "last_7d", "limit": 25}),
    ("query_incidents", {"time_window": "last_7d", "min_severity": "High", "limit": 50}),
    ("query_alerts", {"time_window": "last_24h", "limit": 10}),
    ("get_alert_trend", {"time_window": "last_7d"}),
    ("get_top_entities", {"time_window": "last_7d", "limit": 5}),
)


@dataclass
class World:
    """What the first round returned, with the records the cases talk about picked out."""

    now: datetime
    incidents: list[Incident]
    high: list[Incident]
    alerts: list[AlertSummary]
    trend: list[TrendBin]
    entities: list[EntityCount]
    total_incidents: int
    a: IncidentDetail  # an active, assigned incident (looked at in detail)
    b: IncidentDetail  # another active one, with a host, a file and a hash
    refs: dict[str, int]  # [n] of incidents by number, alerts by id, as the conversation numbers them

    @property
    def benign(self) -> Incident:
        return next(i for i in self.incidents if i.classification == "BenignPositive")

    @property
    def true_positive(self) -> Incident:
        return next(i for i in self.incidents if i.classification == "TruePositive")

    @property
    def new(self) -> Incident:
        return next(i for i in self.high if i.status == "New")

    @property
    def oldest(self) -> Incident:
        return min(self.high, key=lambda i: i.created or self.now)

    def unknown_number(self, offset: int = 1) -> int:
        return max(i.number for i in self.incidents + self.high) + 1000 + offset

    def ref(self, number: int) -> int:
        return self.refs[str(number)]

    def trend_total(self, severity: str | None = None) -> int:
        return sum(b.count for b in self.trend if severity is None or b.severity == severity)

    def busiest_day(self) -> tuple[datetime, int, int]:
        """The day with the most alerts: (day, all alerts, high alerts)."""
        days: dict[datetime, list[TrendBin]] = {}
        for b in self.trend:
            days.setdefault(b.start, []).append(b)
        day = max(days, key=lambda d: sum(b.count for b in days[d]))
        return day, sum(b.count for b in days[day]), sum(b.count for b in days[day] if b.severity == "High")

    def host(self) -> str:
        return next(e.value for e in self.b.entities if e.type == "host")

    def file_hash(self) -> str:
        return next(e.value for e in self.b.entities if e.type == "filehash")

    def file(self) -> str:
        return next(e.value for e in self.b.entities if e.type == "file")

    def ip(self) -> str:
        return next(e.value for e in self.a.entities if e.type == "ip")

    def top(self, entity_type: str) -> EntityCount:
        return next(e for e in self.entities if e.type == entity_type)

    def alert_count_nobody_has(self, start: int) -> int:
        """A number of alerts no result in the world counts (so claiming it is wrong whatever it is about)."""
        taken = {i.alert_count for i in self.incidents + self.high} | {e.alert_count for e in self.entities}
        taken |= {e.high_severity_count for e in self.entities} | {b.count for b in self.trend}
        taken |= {self.trend_total(), len(self.alerts)}
        n = start
        while n in taken:
            n += 1
        return n


async def build_world(sentinel: SentinelClient, now: datetime) -> World:
    """Run the first round directly (the same queries, in the same order, as the scripted model's ``calls``)."""
    results = [await sentinel.run(tool, dict(arguments)) for tool, arguments in CALLS]
    assert all(isinstance(r, QueryResult) for r in results), results
    incidents, high, alerts, trend, entities = (list(r.records) for r in results)  # type: ignore[union-attr]
    active = [i for i in high if i.status == "Active" and i.owner]
    for incident in active[:2]:
        results.append(await sentinel.run("get_incident_detail", {"incident_ref": str(incident.number)}))
    references = References()
    for result in results:
        assert isinstance(result, QueryResult)
        references.register(result)
    refs = {r.key: r.n for r in references.items}
    a, b = (r.records[0] for r in results[-2:])  # type: ignore[union-attr]
    return World(now, incidents, high, alerts, trend, entities, results[0].metadata.total,  # type: ignore[union-attr]
                 a, b, refs)


def calls(world: World) -> tuple[tuple[str, dict[str, Any]], ...]:
    """The scripted model's first round: the listing queries, then the two incidents in detail."""
    return (*CALLS, ("get_incident_detail", {"incident_ref": str(world.a.incident.number)}),
            ("get_incident_detail", {"incident_ref": str(world.b.incident.number)}))


@dataclass(frozen=True)
class Case:
    category: str
    answer: Callable[[World], str]
    fabricated: bool = True


def _hours(world: World, incident: Incident) -> int:
    return round(((world.now - incident.created).total_seconds()) / 3600) if incident.created else 0


def _mutated(value: str) -> str:
    return value[:-1] + ("0" if value[-1] != "0" else "1")


# Every fabrication: one changed fact in otherwise plausible prose.
FABRICATIONS: list[Case] = [
    # incident numbers, in the wordings people and models use
    Case("incident number", lambda w: f"INC-{w.unknown_number()} needs attention too."),
    Case("incident number", lambda w: f"Incident ID: {w.unknown_number(2)} is linked to #{w.a.incident.number}."),
    Case("incident number", lambda w: f"See case {w.unknown_number(3)} for the same user."),
    Case("incident number", lambda w: f"Incidents {w.a.incident.number}, {w.b.incident.number}, and "
                                      f"{w.unknown_number(4)} share an account."),
    Case("incident number", lambda w: f"Incident #{w.a.incident.alert_count} is related to this one."),
    Case("incident number", lambda w: f"#{w.unknown_number(5)} was opened by the same user."),
    Case("incident number", lambda w: f"The earlier one was incident number {w.unknown_number(6)}."),
    Case("incident number", lambda w: f"Look at incidents {w.a.incident.number} and {w.unknown_number(7)} together."),
    # [n] references
    Case("reference", lambda w: "[99] is the same attack."),
    Case("reference", lambda w: f"#{w.a.incident.number} [{w.ref(w.b.incident.number)}] is the newest."),
    Case("reference", lambda w: "Compare [420] with the first one."),
    # IP addresses
    Case("ip", lambda w: f"The sign-ins came from {w.top('ip').value[:-1]}, a known proxy."),
    Case("ip", lambda w: "The sign-ins came from 203.0.113.50."),
    Case("ip", lambda w: "The callback went to 203[.]0[.]113[.]9 over HTTPS."),
    Case("ip", lambda w: "The source was 2001:db8:85a3::8a2e:370:7334 on IPv6."),
    Case("ip", lambda w: f"#{w.a.incident.number} also saw traffic from 45.77.12.9 before the prompts."),
    Case("ip", lambda w: "Block 185.220.101.4 at the firewall right away."),
    # hosts and domain names
    Case("host", lambda w: "Host WS-FIN-999 shows the same behaviour."),
    Case("host", lambda w: "SRV-DC-07 was also touched."),
    Case("host", lambda w: f"It ran on {w.host().lower()}.evil-corp.com as well."),
    Case("host", lambda w: "The lateral movement reached dc01.contoso.local."),
    # accounts
    Case("account", lambda w: "mallory@contoso.com approved the prompts."),
    Case("account", lambda w: "The account CONTOSO\\mallory ran the tool."),
    Case("account", lambda w: f"{w.top('account').value.replace('@', '2@')} is affected too."),
    Case("account", lambda w: "Phishing came from admin@c0ntoso.com."),
    # hashes
    Case("hash", lambda w: f"The dropped file's SHA256 is {_mutated(w.file_hash())}."),
    Case("hash", lambda w: "Its MD5 is 5f4dcc3b5aa765d61d8327deb882cf99."),
    Case("hash", lambda w: "Its SHA1 is 2fd4e1c67a2d28fced849ee1bb76e7391b93eb12."),
    # URLs
    Case("url", lambda w: "Users were sent to hxxp://login-micr0soft[.]com/reset to re-enter passwords."),
    Case("url", lambda w: "The payload came from https://evil.example.com/payload.ps1"),
    Case("url", lambda w: "The lure linked to https://portal-azure.com.evil.io/signin."),
    # file names
    Case("file", lambda w: f"{w.host()} also ran mimikatz.exe."),
    Case("file", lambda w: "The attachment was invoice_2026.docm."),
    Case("file", lambda w: f"A second stage, {w.file().replace('.', '2.', 1)}, followed."),
    # alert ids
    Case("alert id", lambda w: "Alert 0b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d is the first one."),
    Case("alert id", lambda w: f"Alert {_mutated(w.a.alerts[0].alert_id)} fired first."),
    # severity
    Case("severity", lambda w: f"#{w.a.incident.number} [{w.ref(w.a.incident.number)}] is only Low severity, so "
                               "it can wait."),
    Case("severity", lambda w: f"#{w.b.incident.number} is a Medium severity incident."),
    Case("severity", lambda w: f"[{w.ref(w.a.incident.number)}] (Informational) is mostly noise."),
    Case("severity", lambda w: "| Incident | Severity | Status |\n|---|---|---|\n"
                               f"| {w.a.incident.number} | Low | {w.a.incident.status} |"),
    # status
    Case("status", lambda w: f"#{w.a.incident.number} is already closed."),
    Case("status", lambda w: f"#{w.true_positive.number} is still open and needs an owner."),
    Case("status", lambda w: f"#{w.new.number} (High, Active) is being worked on."),
    Case("status", lambda w: f"#{w.benign.number} remains active."),
    # owner
    Case("owner", lambda w: f"#{w.a.incident.number} is assigned to "
                            f"{next(i.owner for i in w.incidents if i.owner and i.owner != w.a.incident.owner)}."),
    Case("owner", lambda w: f"#{w.new.number} is owned by {w.a.incident.owner}."),
    Case("owner", lambda w: f"#{w.a.incident.number} is unassigned, so someone should pick it up."),
    Case("owner", lambda w: f"Owner: {w.benign.owner if w.benign.owner != w.b.incident.owner else 'Bruno Costa'} "
                            f"for #{w.b.incident.number}."),
    # classification and benign advice (withheld)
    Case("classification", lambda w: f"#{w.a.incident.number} is an approved red-team exercise; close it as benign."),
    Case("classification", lambda w: f"#{w.b.incident.number} is a false positive."),
    Case("classification", lambda w: f"#{w.true_positive.number} was benign."),
    Case("classification", lambda w: f"#{w.b.incident.number} is on {w.host()}. It's expected activity from the "
                                     "backup job, no action needed."),
    Case("classification", lambda w: f"#{w.b.incident.number} looks like normal admin activity."),
    # times
    Case("time", lambda w: f"#{w.a.incident.number} came in 6 days ago."),
    Case("time", lambda w: f"#{w.oldest.number} came in overnight."),
    Case("time", lambda w: f"#{w.a.incident.number} was created on "
                           f"{(w.now.replace(day=1)):%Y-%m-%d}."),
    Case("time", lambda w: f"#{w.b.incident.number} fired at "
                           f"{(w.b.incident.created.hour + 3) % 24:02d}:{(w.b.incident.created.minute + 7) % 60:02d} "
                           "UTC."),
    Case("time", lambda w: f"#{w.true_positive.number} was created 2 minutes ago."),
    Case("time", lambda w: f"#{w.a.incident.number} is already {_hours(w, w.a.incident) // 24 + 5} days old."),
    # counts
    Case("count", lambda w: f"There were {w.trend_total('High') + 27} high alerts this week."),
    Case("count", lambda w: f"#{w.a.incident.number} has {w.a.incident.alert_count + 40} alerts."),
    Case("count", lambda w: f"There are {sum(1 for i in w.high if i.status != 'Closed') + 2} open high incidents "
                            "this week."),
    Case("count", lambda w: f"The trend shows {w.trend_total() * 2} alerts in total this week."),
    Case("count", lambda w: f"There are {sum(1 for i in w.high if i.status != 'Closed') + 3} high incidents still "
                            "open."),
    Case("count", lambda w: f"On {w.busiest_day()[0]:%b %d} there were {w.busiest_day()[2] + 5} High alerts."),
    Case("count", lambda w: f"{w.top('account').value} appears in "
                            f"{w.alert_count_nobody_has(w.top('account').alert_count + 1)} alerts."),
    # changes that were never made
    Case("change", lambda w: f"Done - #{w.a.incident.number} is closed now."),
    Case("change", lambda w: f"I've assigned #{w.b.incident.number} to you."),
    Case("change", lambda w: f"#{w.a.incident.number} has been escalated to Tier 3."),
    Case("change", lambda w: f"✅ Severity of #{w.a.incident.number} raised to Medium."),
    Case("change", lambda w: f"The change has been applied to #{w.b.incident.number}."),
    Case("change", lambda w: f"Went ahead and closed #{w.b.incident.number} for you."),
    Case("change", lambda w: f"Closed #{w.a.incident.number} as a false positive."),
]

# Correct answers, in the wordings that used to be flagged.
CORRECT: list[Case] = [
    Case("correct", lambda w: f"The two to look at: [{w.ref(w.a.incident.number)}] #{w.a.incident.number}, "
                              f"[{w.ref(w.b.incident.number)}] #{w.b.incident.number}.", False),
    Case("correct", lambda w: f"#{w.a.incident.number} [{w.ref(w.a.incident.number)}] is {w.a.incident.severity} and "
                              f"{w.a.incident.status}, owned by {w.a.incident.owner}; it came in about "
                              f"{_hours(w, w.a.incident)} hours ago with {w.a.incident.alert_count} alerts.", False),
    Case("correct", lambda w: "| Incident | Severity | Status | Owner | Alerts |\n|---|---|---|---|---|\n" + "\n".join(
        f"| {i.number} | {i.severity} | {i.status} | {i.owner or 'Unassigned'} | {i.alert_count} |"
        for i in w.incidents[:3]), False),
    Case("correct", lambda w: f"This week had {w.trend_total()} alerts; {w.trend_total('High')} were High "
                              f"({100 * w.trend_total('High') / w.trend_total():.1f}%).", False),
    Case("correct", lambda w: f"The #1 priority is #{w.a.incident.number}; the #2 concern is #{w.b.incident.number}.",
         False),
    Case("correct", lambda w: f"#{w.benign.number} was closed as BenignPositive by {w.benign.owner} on "
                              f"{w.benign.created:%b %d}.", False),
    Case("correct", lambda w: f"I confirmed the classification of #{w.true_positive.number}: it was closed as a "
                              "TruePositive.", False),
    Case("correct", lambda w: f"The sign-ins came from {w.ip()}.", False),
    Case("correct", lambda w: f"{w.top('ip').value.replace('.', '[.]')} appears in {w.top('ip').alert_count} alerts.",
         False),
    Case("correct", lambda w: f"Host {w.host()} ran {w.file()} (SHA256 {w.file_hash()}).", False),
    Case("correct", lambda w: f"There were {w.total_incidents} incidents in the last 7 days; {len(w.high)} are High.",
         False),
    Case("correct", lambda w: f"#{w.a.incident.number} is not a false positive: it is still open.", False),
    Case("correct", lambda w: f"On {w.busiest_day()[0]:%b %d} there were {w.busiest_day()[1]} alerts, "
                              f"{w.busiest_day()[2]} of them High.", False),
    Case("correct", lambda w: f"#{w.new.number} is New and unassigned.", False),
    Case("correct", lambda w: f"About {round(w.trend_total(), -1)} alerts fired this week.", False),
    Case("correct", lambda w: f"Alert [{w.ref(w.alerts[0].alert_id)}] fired at {w.alerts[0].time:%H:%M} UTC.", False),
    Case("correct", lambda w: f"Of the {len(w.high)} high incidents, "
                              f"{sum(1 for i in w.high if i.status != 'Closed')} are still open.", False),
    Case("correct", lambda w: f"Sentinel evaluated 14,448 sign-ins this week; only #{w.a.incident.number} stood out.",
         False),
    Case("correct", lambda w: f"{w.top('account').value} is the most targeted account "
                              f"({w.top('account').alert_count} alerts).", False),
    Case("correct", lambda w: f"Close #{w.benign.number}? It already is: it was closed as benign.", False),
    Case("correct", lambda w: f"There are {sum(1 for i in w.high if i.status != 'Closed')} high incidents still "
                              "open.", False),
    Case("correct", lambda w: f"#{w.a.incident.number}: owner {w.a.incident.owner}, severity {w.a.incident.severity}, "
                              f"{_hours(w, w.a.incident)}h old.", False),
    Case("correct", lambda w: f"#{w.oldest.number} was created on {w.oldest.created:%Y-%m-%d} "
                              f"({(w.now - w.oldest.created).days} days ago).", False),
]
