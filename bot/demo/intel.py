"""Threat-intelligence rows of the demo workspace: ThreatIntelIndicators (STIX) and ThreatIntelligenceIndicator.

An indicator is written to both tables (the newer STIX-shaped one and the legacy one), re-emitted weekly as the
feeds refresh them, so any 7-day window holds the feed. The feed lists part of the attackers' addresses and all
but two of the malicious domains (not everything an attacker uses is known); an incident that matched
threat intelligence gets its indicator, and malware incidents' file hashes are listed in half the cases.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.demo.catalog import MALICIOUS_DOMAINS
from bot.demo.values import compact_json, row_guid, timestamp
from bot.demo.world import World

Rows = dict[str, list[dict]]

# Observable kind -> (STIX observable key, legacy column)
KINDS = {"ipv4-addr": "NetworkIP", "domain-name": "DomainName", "url": "Url", "file": "FileHashValue"}


@dataclass(frozen=True)
class Indicator:
    kind: str  # a key of KINDS
    value: str
    label: str  # what it is: "Qakbot C2", "phishing", ...
    confidence: int

    @property
    def observable_key(self) -> str:
        return "file:hashes.'SHA-256'" if self.kind == "file" else f"{self.kind}:value"


def rows(indicator: Indicator, when: datetime, valid_days: int = 30) -> tuple[dict, dict]:
    """The indicator's ThreatIntelIndicators and ThreatIntelligenceIndicator rows, valid from ``when``."""
    stamp, until = timestamp(when), timestamp(when + timedelta(days=valid_days))
    ident = row_guid("indicator", indicator.kind, indicator.value)
    pattern = f"[{indicator.observable_key} = '{indicator.value}']"
    stix = {"TimeGenerated": stamp, "Created": stamp, "Modified": stamp, "ValidFrom": stamp, "ValidUntil": until,
            "Id": f"indicator--{ident}", "ObservableKey": indicator.observable_key,
            "ObservableValue": indicator.value, "Pattern": pattern, "Confidence": indicator.confidence,
            "IsActive": 1, "IsDeleted": 0, "Revoked": 0, "LastUpdateMethod": "TAXII", "Tags": indicator.label,
            "Data": compact_json({"type": "indicator", "id": f"indicator--{ident}", "pattern": pattern,
                                  "pattern_type": "stix", "name": indicator.label, "confidence": indicator.confidence,
                                  "valid_from": stamp, "valid_until": until,
                                  "labels": [indicator.label]})}
    legacy = {"TimeGenerated": stamp, "IndicatorId": ident, "ExternalIndicatorId": f"indicator--{ident}",
              "Action": "alert", "Active": 1, "ConfidenceScore": float(indicator.confidence),
              "Description": f"{indicator.label} ({indicator.kind})", "ExpirationDateTime": until,
              "IndicatorProvider": "Contoso TI feed", "ThreatType": "MaliciousUrl" if indicator.kind in
              ("url", "domain-name") else "Malware" if indicator.kind == "file" else "C2",
              "TrafficLightProtocolLevel": "Amber", "Tags": indicator.label, "PassiveOnly": 0, "ThreatSeverity": 4,
              KINDS[indicator.kind]: indicator.value}
    if indicator.kind == "file":
        legacy["FileHashType"] = "SHA256"
    return stix, legacy


def add(out: Rows, indicator: Indicator, when: datetime) -> None:
    stix, legacy = rows(indicator, when)
    out["ThreatIntelIndicators"].append(stix)
    out["ThreatIntelligenceIndicator"].append(legacy)


def feed(world: World) -> list[Indicator]:
    """The indicators the feed always lists."""
    listed = [Indicator("domain-name", domain, "phishing" if "login" in domain or "docs" in domain
                        else "malware download", 80) for domain in MALICIOUS_DOMAINS[:-2]]
    listed += [Indicator("ipv4-addr", ip, "Qakbot C2", 70) for ip in world.attacker_ips
               if zlib.crc32(ip.encode()) % 2 == 0]
    return listed


def listed_today(world: World, day_start: datetime, out: Rows) -> None:
    """The feed's weekly refresh: each indicator on its own day of the week."""
    ordinal = day_start.toordinal()
    for indicator in feed(world):
        if (zlib.crc32(indicator.value.encode()) + ordinal) % 7 == 0:
            add(out, indicator, day_start + timedelta(hours=3))
