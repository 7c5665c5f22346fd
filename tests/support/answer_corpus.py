"""A generator of analyst-grade answers, true and false, over what the real tools returned (issue 24).

The hand-written corpus (``fabrications``) is what the check was tuned on; this one is how it is judged. Every
sample is built from a seed: the seed picks the records (which incident, which host, which analyst), the
wording (several frames per statement), and the structure (a sentence, a bullet under its incident's heading,
a markdown table row, a paragraph of several incidents). A lie changes one relation of real records (a
severity, an owner, a host's incident, a tactic, who is on call, the trend's peak, a percentage, an action
the bot never took); a correct answer states the records as they are, in the same structures, together with
what analysts write around facts (instructions, recommendations, hypotheticals, general knowledge, ranks,
checklists, derived counts). The lie's span is marked in the template with « »; a lie is caught when a finding
overlaps that span (or withholds the sentence holding it).

Two sets, split by seed: ``TUNING_SEEDS`` (looked at while changing the check) and ``HELD_OUT_SEEDS`` (only
reported). Nothing here is a fixed number: every value comes from the results.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.orchestrator.conversation import Conversation
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import (
    AlertSummary,
    EntityCount,
    Incident,
    IncidentDetail,
    OnCallEntry,
    QueryResult,
    TrendBin,
)

TUNING_SEEDS = range(1, 13)
HELD_OUT_SEEDS = range(9001, 9013)  # never looked at while changing the check: only reported

CALLS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("query_incidents", {"time_window": "last_7d", "limit": 100}),
    ("query_alerts", {"time_window": "last_24h", "limit": 25}),
    ("get_alert_trend", {"time_window": "last_7d"}),
    ("get_top_entities", {"time_window": "last_7d", "limit": 8}),
    ("get_on_call", {}),
)
DETAILS = 6  # incidents read in detail (their entities, alerts, tactics)
SEVERITIES = ("High", "Medium", "Low", "Informational")
TACTICS = ("InitialAccess", "Execution", "Persistence", "PrivilegeEscalation", "DefenseEvasion", "CredentialAccess",
           "Discovery", "LateralMovement", "Collection", "Exfiltration", "CommandAndControl", "Impact")
PRODUCTS = ("Microsoft Defender for Endpoint", "Microsoft Entra ID Protection", "Microsoft Defender for Cloud Apps",
            "Microsoft Defender for Office 365", "Microsoft Sentinel")


@dataclass(frozen=True)
class Sample:
    category: str
    text: str
    lie: tuple[int, int] | None  # the false statement's span; None for a correct answer


@dataclass
class World:
    now: datetime
    incidents: list[Incident]
    alerts: list[AlertSummary]
    trend: list[TrendBin]
    entities: list[EntityCount]
    roster: list[OnCallEntry]
    details: list[IncidentDetail]
    conversation: Conversation  # the facts and references the results left


async def build_world(sentinel: SentinelClient, now: datetime) -> World:
    """Run the tools and record every result in a conversation, as the orchestrator does after each call."""
    conversation = Conversation()
    results = []
    for tool, arguments in CALLS:
        result = await sentinel.run(tool, dict(arguments))
        assert isinstance(result, QueryResult), result
        conversation.remember(result, now)
        results.append(result)
    incidents, alerts, trend, entities, roster = (list(r.records) for r in results)
    details = []
    for incident in incidents:
        if len(details) == DETAILS:
            break
        result = await sentinel.run("get_incident_detail", {"incident_ref": str(incident.number)})
        assert isinstance(result, QueryResult), result
        if result.records and result.records[0].entities:
            conversation.remember(result, now)
            details.append(result.records[0])
    return World(now, incidents, alerts, trend, entities, roster, details, conversation)


# -- building blocks -------------------------------------------------------------------------------------------


def unmark(template: str) -> tuple[str, tuple[int, int] | None]:
    """The text without its « » marks, and the marked span."""
    if "«" not in template:
        return template, None
    start = template.index("«")
    end = template.index("»") - 1
    return template.replace("«", "").replace("»", ""), (start, end)


def _ref(rng: random.Random, number: int) -> str:
    return rng.choice((f"#{number}", f"incident {number}", f"Incident #{number}", f"**#{number}**"))


def _other(rng: random.Random, value: str, choices: tuple[str, ...]) -> str:
    return rng.choice([c for c in choices if c != value])


def _owners(world: World) -> list[str]:
    return sorted({i.owner for i in world.incidents if i.owner})


def _hours(world: World, moment: datetime) -> float:
    return (world.now - moment).total_seconds() / 3600


class _Gen:
    """One seed's samples."""

    def __init__(self, world: World, seed: int) -> None:
        self.w, self.rng = world, random.Random(seed)

    def pick(self, items: list[Any]) -> Any:
        return self.rng.choice(items)

    def incident(self, where: Callable[[Incident], bool] = lambda i: True) -> Incident:
        return self.pick([i for i in self.w.incidents if where(i)])

    def detail(self) -> IncidentDetail:
        return self.pick(self.w.details)

    # statements about one incident, true or false: (template with « » around the value)

    def severity(self, lie: bool) -> str:
        i = self.incident()
        value = _other(self.rng, i.severity, SEVERITIES) if lie else i.severity
        if lie and i.severity != "High" and self.rng.random() < 0.25:
            value = "critical"
        r = _ref(self.rng, i.number)
        frames = [f"{r} is «{value}» severity.", f"{r} is rated «{value}».", f"{r} («{value}») needs a look.",
                  f"Severity of {r}: «{value}».", f"{r} — «{value}», {i.status.lower()}.",
                  f"### {r}: {i.title}\n- Severity: «{value}»\n- Status: {i.status}",
                  f"| Incident | Title | Severity |\n|---|---|---|\n| {i.number} | {i.title} | «{value}» |"]
        if value == "critical":
            frames = [f"{r} is «critical».", f"{r} is a «critical» incident."]
        return self.pick(frames)

    def status(self, lie: bool) -> str:
        i = self.incident()
        closed = i.status == "Closed"
        r = _ref(self.rng, i.number)
        if closed != lie:  # said closed: a closed one truly, an open one falsely
            value = self.pick(["Resolved", "Closed"]) if lie else "Closed"
            frames = [f"{r} is already «closed».", f"{r} has been «resolved».",
                      f"### {r} — {i.title}\n- «{value}»", f"{r}: «{value.lower()}».",
                      f"| # | Status |\n|---|---|\n| {i.number} | «{value}» |"]
        else:
            value = i.status if not lie else self.pick(["Active", "New"])
            frames = [f"{r} is still «open».", f"{r} is «{value}».", f"{r} remains «active» and needs work.",
                      f"### {r}\n- Status: «{value}»",
                      f"| Incident | Status |\n|---|---|\n| {i.number} | «{value}» |"]
        return self.pick(frames)

    def owner(self, lie: bool) -> str:
        i = self.incident(lambda x: x.owner is not None)
        others = [o for o in _owners(self.w) if o != i.owner]
        value = self.pick(others) if lie else i.owner
        r = _ref(self.rng, i.number)
        frames = [f"{r} is assigned to «{value}».", f"{r} is owned by «{value}».", f"«{value}» owns {r}.",
                  f"«{value}» is handling {r}.", f"### {r}: {i.title}\n- being worked by «{value}»",
                  f"| Incident | Severity | Owner |\n|---|---|---|\n| {i.number} | {i.severity} | «{value}» |"]
        return self.pick(frames)

    def coordinated(self, lie: bool) -> str:
        sev = self.pick([s for s in SEVERITIES if sum(1 for i in self.w.incidents if i.severity == s) >= 3])
        same = self.rng.sample([i for i in self.w.incidents if i.severity == sev], 3)
        if lie:
            same[self.rng.randrange(3)] = self.incident(lambda x: x.severity != sev)
        a, b, c = (f"#{i.number}" for i in same)
        frames = [f"{a}, {b} and {c} are all «{sev}»." if sev != "Informational" else
                  f"{a}, {b} and {c} are all «Informational».",
                  f"{a}, {b} and {c} are «{sev}» severity.", f"All three ({a}, {b}, {c}) are «{sev}»."]
        return self.pick(frames)

    def owner_many(self, lie: bool) -> str:
        owners = [o for o in _owners(self.w) if sum(1 for i in self.w.incidents if i.owner == o) >= 2]
        who = self.pick(owners)
        mine = self.rng.sample([i for i in self.w.incidents if i.owner == who], 2)
        if lie:
            mine[1] = self.incident(lambda x: x.owner != who)
        a, b = (f"#{i.number}" for i in mine)
        frames = [f"«{who}» owns {a} and {b}.", f"{a} and {b} are both assigned to «{who}».",
                  f"{a} and {b}: both with «{who}»."]
        return self.pick(frames)

    def owner_pairs(self, lie: bool) -> str:
        first, second = self.rng.sample([i for i in self.w.incidents if i.owner], 2)
        second_owner = second.owner
        if lie:
            second_owner = self.pick([o for o in _owners(self.w) if o != second.owner])
        return (f"{first.owner} is handling #{first.number}, «{second_owner}» has #{second.number}." if lie else
                f"{first.owner} is handling #{first.number}, {second_owner} has #{second.number}.")

    def entity_of(self, lie: bool) -> str:
        d = self.detail()
        own = {e.value.lower() for e in d.entities}
        if lie:
            pool = [e for x in self.w.details if x is not d for e in x.entities if e.value.lower() not in own
                    and e.type in ("host", "account", "ip")]
            if not pool:
                return self.severity(True)
            entity = self.pick(pool)
        else:
            entity = self.pick(list(d.entities))
        r = _ref(self.rng, d.incident.number)
        value = entity.value.lower() if entity.type == "host" and self.rng.random() < 0.5 else entity.value
        frames = [f"«{value}» is part of {r}.", f"{r} involves «{value}».",
                  f"{r} includes the {entity.type} «{value}».", f"### {r}\n- Entities: «{value}»"]
        return self.pick(frames)

    def alert_name(self, lie: bool) -> str:
        d = self.pick([x for x in self.w.details if x.alerts])
        names = {a.name for x in self.w.details for a in x.alerts} | {a.name for a in self.w.alerts}
        if lie:
            stem = self.pick(["Suspicious PowerShell download cradle", "Anomalous token replay",
                              "Mass file deletion on share", "Impossible travel to sanctioned country",
                              "Credential dumping via comsvcs.dll", "Rare parent process for rundll32"])
            name = stem if stem not in names else stem + " (variant)"
        else:
            name = self.pick(list(d.alerts)).name
        r = _ref(self.rng, d.incident.number)
        frames = [f"{r} was raised by the «\"{name}\"» alert.", f"{r} contains the alert «**{name}**».",
                  f"The «'{name}'» alert fired for {r}.", f"### {r}\n- Alert: «{name}»"]
        return self.pick(frames)

    def tactic(self, lie: bool) -> str:
        i = self.incident(lambda x: bool(x.tactics))
        value = self.pick([t for t in TACTICS if t not in i.tactics]) if lie else self.pick(list(i.tactics))
        r = _ref(self.rng, i.number)
        if self.rng.random() < 0.3:
            product = self.pick([p for p in PRODUCTS if p not in i.products]) if lie else self.pick(list(i.products))
            return self.pick([f"{r} came from «{product}».", f"{r} was detected by «{product}»."])
        return self.pick([f"{r} maps to the «{value}» tactic.", f"{r} is tagged «{value}».",
                          f"MITRE tactic for {r}: «{value}».",
                          f"| Incident | Tactic |\n|---|---|\n| {i.number} | «{value}» |"])

    def on_call(self, lie: bool) -> str:
        on = [e for e in self.w.roster if e.on_shift]
        off = [e for e in self.w.roster if not e.on_shift]
        kind = self.rng.randrange(4)
        if kind == 0 and on and off:
            person = self.pick(off if lie else on)
            return self.pick([f"«{person.name}» is on call right now.", f"Right now «{person.name}» is on shift.",
                              f"On call now: «{person.name}»."])
        person = self.pick(self.w.roster)
        if kind == 1:
            teams = sorted({e.team for e in self.w.roster} | {"Threat Hunting"})
            team = _other(self.rng, person.team, tuple(teams)) if lie else person.team
            return self.pick([f"{person.name} is on «{team}».", f"{person.name} ({'«' + team + '»'}) is the contact."])
        if kind == 2:
            end = person.shift_end + (timedelta(hours=self.pick([2, 3, -3])) if lie else timedelta(0))
            return self.pick([f"{person.name}'s shift ends at «{end:%H:%M} UTC».",
                              f"{person.name} is on until «{end:%H:%M} UTC»."])
        phone = person.phone[:-2] + f"{(int(person.phone[-2:]) + 17) % 100:02d}" if lie else person.phone
        return self.pick([f"Reach {person.name} at «{phone}».", f"{person.name}: «{phone}»."])

    def trend_peak(self, lie: bool) -> str:
        days: Counter[datetime] = Counter()
        for b in self.w.trend:
            days[b.start] += b.count
        peak = max(days, key=lambda d: days[d])
        day = self.pick([d for d in days if d.date() != peak.date()]) if lie else peak
        return self.pick([f"Alerts peaked on «{day:%A}».", f"The busiest day was «{day:%b %d}».",
                          f"Volume was highest on «{day:%A, %B %d}» ({days[peak]} alerts)." if not lie else
                          f"Volume was highest on «{day:%A, %B %d}».",
                          f"The peak was «{day:%Y-%m-%d}»."])

    def seen(self, lie: bool) -> str:
        e = self.pick([x for x in self.w.entities if x.first_seen and x.last_seen])
        first = self.rng.random() < 0.5
        moment = e.first_seen if first else e.last_seen
        assert moment is not None
        if lie:
            moment = moment - timedelta(days=self.pick([2, 3, 4]))
        word = "first" if first else "last"
        return self.pick([f"{e.value} was {word} seen «{moment:%b %d}».",
                          f"{e.value} was {word} seen on «{moment:%Y-%m-%d}».",
                          f"{word.capitalize()} seen for {e.value}: «{moment:%A %b %d}»."])

    def percentage(self, lie: bool) -> str:
        total = len(self.w.incidents)
        sev = self.pick([s for s in SEVERITIES if any(i.severity == s for i in self.w.incidents)])
        n = sum(1 for i in self.w.incidents if i.severity == sev)
        share = 100 * n / total
        if lie:
            share = share + self.pick([15, 25, -12]) if share > 15 else share + 30
        kind = self.rng.randrange(2)
        if kind == 0:
            return self.pick([f"«{share:.0f}%» of the {total} incidents this week are {sev}.",
                              f"{sev} incidents are «{share:.0f}%» of this week's {total}."])
        closed = sum(1 for i in self.w.incidents if i.status == "Closed")
        said = closed + (self.pick([5, -5]) if lie else 0)
        return f"«{said} of the {total}» incidents this week are closed."

    def entity_table(self, lie: bool) -> str:
        rows = list(self.w.entities[:4])
        counts = [e.alert_count for e in rows]
        if lie:
            a, b = self.rng.sample(range(len(rows)), 2)
            while counts[a] == counts[b]:
                a, b = self.rng.sample(range(len(rows)), 2)
            counts[a], counts[b] = counts[b], counts[a]
            first = min(a, b)
        lines = ["| Entity | Type | Alerts |", "|---|---|---|"]
        for index, (e, n) in enumerate(zip(rows, counts, strict=True)):
            cell = f"«{n}»" if lie and index == first else str(n)
            lines.append(f"| {e.value} | {e.type} | {cell} |")
        return "\n".join(lines)

    def created_table(self, lie: bool) -> str:
        picked = self.rng.sample([i for i in self.w.incidents if i.created], 3)
        wrong = self.rng.randrange(3) if lie else -1
        lines = ["| Incident | Severity | Created (UTC) |", "|---|---|---|"]
        for index, i in enumerate(picked):
            assert i.created is not None
            moment = i.created + (timedelta(hours=3) if index == wrong else timedelta(0))
            cell = f"«{moment:%Y-%m-%d %H:%M}»" if index == wrong else f"{moment:%Y-%m-%d %H:%M}"
            lines.append(f"| {i.number} | {i.severity} | {cell} |")
        return "\n".join(lines)

    def action(self, lie: bool) -> str:
        i = self.incident(lambda x: x.status != "Closed")
        if not lie:  # the same verbs, as advice or as what the analyst could do
            return self.pick([f"You may want to page the on-call analyst about #{i.number}.",
                              f"Next step: isolate the host in Defender and disable the account for #{i.number}.",
                              f"Should I post a summary of #{i.number} to the channel? I can't do that myself.",
                              f"Consider notifying the owner of #{i.number}.",
                              f"If the sign-ins continue, escalate #{i.number} to Tier 3."])
        return self.pick([f"«I've paged» the on-call analyst about #{i.number}.",
                          f"«I notified» the owner of #{i.number}.",
                          f"«I isolated» the host and disabled the account from #{i.number}.",
                          f"«Posted» the summary of #{i.number} to the channel.",
                          f"«I've escalated» #{i.number} to Tier 3.",
                          f"«I blocked» the sender of #{i.number}."])

    def identifier(self, lie: bool) -> str:
        d = self.detail()
        if not lie:
            e = self.pick(list(d.entities))
            return self.pick([f"The activity in #{d.incident.number} ties to {e.value}.",
                              f"Pivot on {e.value} from #{d.incident.number}."])
        unknown = self.rng.choice([f"WS-HR-{self.rng.randrange(700, 999)}", f"203.0.113.{self.rng.randrange(2, 250)}",
                                   f"#{max(i.number for i in self.w.incidents) + self.rng.randrange(50, 900)}",
                                   f"m.{self.pick(['okafor', 'lindqvist', 'barros'])}@contoso.com"])
        return self.pick([f"#{d.incident.number} also touched «{unknown}».", f"Related: «{unknown}»."])

    def count(self, lie: bool) -> str:
        sev = self.pick(SEVERITIES[:3])
        total = sum(b.count for b in self.w.trend if b.severity == sev)
        said = total + (self.pick([9, 23, -7]) if lie and total > 7 else 11 if lie else 0)
        return self.pick([f"There were «{said} {sev.lower()} alerts» this week.",
                          f"This week had «{said} {sev}-severity alerts»."])

    def age(self, lie: bool) -> str:
        i = self.incident(lambda x: x.created is not None and _hours(self.w, x.created) > 3)
        assert i.created is not None
        days = _hours(self.w, i.created) / 24
        said = round(days) + (4 if lie else 0)
        if said < 1:
            hours = round(_hours(self.w, i.created)) + (30 if lie else 0)
            return f"#{i.number} came in «{hours} hours ago»."
        return self.pick([f"#{i.number} came in «{said} days ago».", f"#{i.number} was created «{said} days ago»."])

    def benign(self, lie: bool) -> str:
        if lie:
            i = self.incident(lambda x: x.status != "Closed")
            return self.pick([f"#{i.number} is a «false positive».", f"#{i.number} is «benign»; close it.",
                              f"#{i.number} looks like «expected admin activity»."])
        i = self.incident(lambda x: x.classification in ("BenignPositive", "FalsePositive"))
        return f"#{i.number} was closed as {'a false positive' if i.classification == 'FalsePositive' else 'benign'}."

    # correct only: what analysts write around facts

    def instructions(self) -> str:
        i = self.incident(lambda x: x.status != "Closed")
        return self.pick([
            f"To close #{i.number}, set Status to Closed and pick a classification: True Positive, Benign Positive "
            "or False Positive.",
            "Confirm in Active Directory whether the account is expected to sign in from there.",
            f"I'd treat the likelihood of compromise in #{i.number} as high until the user confirms the prompts.",
            f"If #{i.number} turns out to be the backup job, close it as Benign Positive.",
            f"Once you have checked the host, you can close #{i.number} as a false positive if nothing is found.",
            f"Should #{i.number} be High? Only if the account is privileged.",
            "MFA fatigue attacks usually show many denied pushes followed by one approval.",
            f"I'd assign #{i.number} to {self.pick(_owners(self.w))}, who knows this tenant.",
            f"Consider raising #{i.number} to High if the sign-ins continue."])

    def rank_table(self) -> str:
        picked = self.rng.sample(self.w.incidents, 6)
        lines = ["| # | Incident | Severity | Owner |", "|---|---|---|---|"]
        for rank, i in enumerate(picked, start=1):
            lines.append(f"| {rank} | {i.number} | {i.severity} | {i.owner or 'Unassigned'} |")
        return "Top six by priority:\n\n" + "\n".join(lines)

    def checklist(self) -> str:
        closed = self.rng.sample([i for i in self.w.incidents if i.status == "Closed"], 3)
        return "Already done this week:\n" + "\n".join(
            f"- ✅ #{i.number} — closed ({i.classification or 'unclassified'})" for i in closed)

    def derived(self) -> str:
        kind = self.rng.randrange(3)
        if kind == 0:
            open_by: Counter[str] = Counter(i.owner for i in self.w.incidents if i.owner and i.status != "Closed")
            who, n = self.pick(sorted(open_by.items()))
            return f"{who} owns {n} open incident{'s' if n != 1 else ''} in this list."
        if kind == 1:
            n = sum(1 for i in self.w.incidents if i.created and _hours(self.w, i.created) <= 48)
            return f"{n} incidents were created in the last 48 hours."
        total = sum(b.count for b in self.w.trend)
        return f"Between {total - self.rng.randrange(5, 20)} and {total + self.rng.randrange(5, 20)} alerts fired " \
               "this week."


_PAIRED = ("severity", "status", "owner", "coordinated", "owner_many", "owner_pairs", "entity_of", "alert_name",
           "tactic", "on_call", "trend_peak", "seen", "percentage", "entity_table", "created_table", "action",
           "identifier", "count", "age", "benign")
_CORRECT_ONLY = ("instructions", "rank_table", "checklist", "derived")


def samples(world: World, seed: int) -> list[Sample]:
    """One seed's answers: for every category a lie and a correct statement, then a few correct answers of
    what analysts write around facts, and one longer correct answer made of several of them."""
    gen = _Gen(world, seed)
    out: list[Sample] = []
    for name in _PAIRED:
        make = getattr(gen, name)
        text, span = unmark(make(True))
        out.append(Sample(name.replace("_", " "), text, span))
        text, _ = unmark(make(False))
        out.append(Sample("correct: " + name.replace("_", " "), text, None))
    for name in _CORRECT_ONLY:
        out.append(Sample("correct: " + name.replace("_", " "), getattr(gen, name)(), None))
    parts = [unmark(getattr(gen, gen.pick(list(_PAIRED)))(False))[0] for _ in range(4)]
    parts.insert(gen.rng.randrange(4), getattr(gen, gen.pick(list(_CORRECT_ONLY)))())
    out.append(Sample("correct: composite", "## Summary\n\n" + "\n\n".join(parts), None))
    return out


@dataclass
class Score:
    """Per category: lies caught at the claim, caught elsewhere only, missed; correct answers marked."""

    rows: dict[str, Counter[str]]

    def add(self, sample: Sample, findings: list[Any]) -> None:
        tally = self.rows.setdefault(sample.category, Counter())
        tally["cases"] += 1
        if sample.lie is None:
            tally["marked"] += bool(findings)
            return
        start, end = sample.lie
        at_claim = any((f.start < end and start < f.end) or (f.withhold and f.sentence[0] <= start < f.sentence[1])
                       for f in findings)
        tally["at claim" if at_claim else "elsewhere" if findings else "missed"] += 1

    def totals(self) -> tuple[int, int, int, int]:
        """(lies, lies caught at the claim, correct answers, correct answers marked)"""
        lies = [t for c, t in self.rows.items() if not c.startswith("correct")]
        right = [t for c, t in self.rows.items() if c.startswith("correct")]
        return (sum(t["cases"] for t in lies), sum(t["at claim"] for t in lies), sum(t["cases"] for t in right),
                sum(t["marked"] for t in right))


def score(world: World, seeds: range, check: Callable[[str], list[Any]]) -> Score:
    result = Score({})
    for seed in seeds:
        for sample in samples(world, seed):
            result.add(sample, check(sample.text))
    return result
