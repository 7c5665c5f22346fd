"""New incidents added to a running demo workspace: for tests and Playground scenarios ("a new incident arrives").

An injected incident is a SecurityIncident row (status New, one alert) and its SecurityAlert row with a host,
an account and an IP entity, stamped with the backend's "now", so every query sees it at once and a poller
asking for changes since a moment before picks it up. Numbers start at ``FIRST_NUMBER``, far above the
generated ones, so the generator's numbering never meets them.

Two ways in. ``DemoBackend.inject_incident`` in the same process; or the inbox file, a JSON line per incident
appended by ``python -m bot demo new-incident`` (``append``) and read by the running bot at its next query
(``read``), which is how another process reaches the demo's in-memory database. The backend keeps the rows
it applied and writes them again into each regenerated database, so an injected incident survives the day
change (a restarted bot re-reads the whole inbox).
"""

from __future__ import annotations

import fcntl
import json
import logging
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.demo.catalog import RESOURCE_GROUP, SUBSCRIPTION_ID, TENANT_ID, WORKSPACE_NAME
from bot.demo.values import compact_json
from bot.sentinel.demo_sql import iso
from bot.sentinel.params import InvalidParameter, Severity, parse_enum

log = logging.getLogger(__name__)
FIRST_NUMBER = 900_001
MAX_TITLE = 256
_PRODUCT = "Microsoft Defender for Endpoint"


@dataclass(frozen=True)
class Injection:
    """What one injected incident is made from (one inbox line)."""

    number: int
    title: str
    severity: Severity
    owner: str | None = None  # a UPN or email of a demo analyst; unassigned when None
    created: datetime | None = None  # when it was added (the inbox line's), kept across the bot's restarts
    host: str = "WS-FIN-042"
    account: str = "lena.fischer@contoso.com"
    ip: str = "203.0.113.77"

    @staticmethod
    def checked(number: int, title: object, severity: object, owner: object = None,
                created: object = None) -> Injection:
        text = " ".join(str(title or "").split())
        if not text:
            raise InvalidParameter("title", "is required: the new incident's title")
        if len(text) > MAX_TITLE:
            raise InvalidParameter("title", f"is longer than {MAX_TITLE} characters")
        who = " ".join(str(owner).split()) if owner else None
        level = Severity(parse_enum(Severity, "severity", severity, Severity.HIGH).value)
        return Injection(number, text, level, who or None, _moment(created))

    def to_json(self) -> str:
        return json.dumps({"number": self.number, "title": self.title, "severity": self.severity.value,
                           "owner": self.owner, "created": self.created.isoformat() if self.created else None},
                          ensure_ascii=False)


def _moment(value: object) -> datetime | None:
    """An inbox line's "created" (ISO 8601, UTC); None when missing or unreadable (then: when it is applied)."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    try:
        moment = datetime.fromisoformat(str(value)) if value else None
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment and moment.tzinfo is None else moment


def create(inbox: Path) -> None:
    """The inbox a bot reads, created (empty, with its folder) when it starts if it is not there: so an inbox that
    does not exist is one no bot has read, and ``python -m bot demo new-incident`` refuses to write there. A folder
    that cannot be made is logged; the bot runs on without new incidents from other processes."""
    try:
        inbox.parent.mkdir(parents=True, exist_ok=True)
        inbox.touch(exist_ok=True)
    except OSError as error:
        log.warning("cannot create the demo inbox %s (%s): ./run new-incident cannot reach this bot", inbox,
                    error.strerror or type(error).__name__)


def append(inbox: Path, title: object, severity: object, owner: object = None) -> int:
    """Append an incident to the inbox file (created if missing) and return its number; safe against concurrent
    writers (an exclusive lock while the next number is counted and the line written)."""
    inbox.parent.mkdir(parents=True, exist_ok=True)
    with inbox.open("a+", encoding="utf-8") as file:
        fcntl.flock(file, fcntl.LOCK_EX)
        file.seek(0)
        number = FIRST_NUMBER + sum(1 for line in file if line.strip())
        injection = Injection.checked(number, title, severity, owner, datetime.now(UTC))
        file.write(injection.to_json() + "\n")
        file.flush()
    return number


def read(inbox: Path, offset: int) -> tuple[list[Injection], int]:
    """The complete inbox lines after byte ``offset``, and the offset after them; an unreadable line is skipped."""
    try:
        with inbox.open("rb") as file:
            file.seek(offset)
            data = file.read()
    except FileNotFoundError:
        return [], offset
    complete = data[: data.rfind(b"\n") + 1]  # a line being written is read next time
    found = []
    for line in complete.decode("utf-8", errors="replace").splitlines():
        try:
            item = json.loads(line)
            found.append(Injection.checked(int(item["number"]), item["title"], item["severity"], item.get("owner"),
                                           item.get("created")))
        except (ValueError, KeyError, TypeError, InvalidParameter):
            continue
    return found, offset + len(complete)


def rows(injection: Injection, now: datetime, owner: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The SecurityIncident row and the SecurityAlert row of an injected incident: created when it was added to
    the inbox (never after ``now``), or at ``now``; the incident row's TimeGenerated is ``now`` either way, so a
    poller asking for changes since a moment before sees it."""
    created = min(injection.created, now) if injection.created else now
    seen, stamp = iso(now), iso(created)
    name = str(uuid.uuid5(uuid.NAMESPACE_URL, f"sentinel-demo-injected/{injection.number}"))
    alert_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"sentinel-demo-injected-alert/{injection.number}"))
    workspace = (f"subscriptions/{SUBSCRIPTION_ID}/resourceGroups/{RESOURCE_GROUP}/providers/"
                 f"Microsoft.OperationalInsights/workspaces/{WORKSPACE_NAME}")
    description = f"{injection.title} (Demo incident added while the bot was running.)"
    tactics = ["Execution"]
    incident = {
        "TenantId": TENANT_ID, "TimeGenerated": seen, "IncidentName": name, "Title": injection.title,
        "Description": description, "Severity": injection.severity.value, "Status": "New",
        "Classification": "", "ClassificationComment": "", "ClassificationReason": "",
        "Owner": compact_json(owner or {"objectId": None, "email": None, "assignedTo": None,
                                         "userPrincipalName": None}),
        "ProviderName": "Azure Sentinel", "ProviderIncidentId": str(injection.number),
        "FirstActivityTime": stamp, "LastActivityTime": stamp, "FirstModifiedTime": None,
        "LastModifiedTime": stamp, "CreatedTime": stamp, "ClosedTime": None, "IncidentNumber": injection.number,
        "RelatedAnalyticRuleIds": "[]", "AlertIds": compact_json([alert_id]), "BookmarkIds": "[]",
        "Comments": "[]", "Tasks": "[]", "Labels": "[]",
        "IncidentUrl": f"https://portal.azure.com/#asset/Microsoft_Azure_Security_Insights/Incident/{workspace}/"
                       f"providers/Microsoft.SecurityInsights/Incidents/{name}",
        "AdditionalData": compact_json({"alertsCount": 1, "bookmarksCount": 0, "commentsCount": 0,
                                        "alertProductNames": [_PRODUCT], "tactics": tactics, "techniques": []}),
        "ModifiedBy": "Incident created from alert", "SourceSystem": "Azure", "Type": "SecurityIncident",
    }
    user, _, domain = injection.account.partition("@")
    entities = [
        {"$id": "1", "HostName": injection.host, "DnsDomain": "", "NetBiosName": injection.host,
         "OSFamily": "Windows", "Type": "host"},
        {"$id": "2", "Name": user, "UPNSuffix": domain, "UserPrincipalName": injection.account, "Type": "account"},
        {"$id": "3", "Address": injection.ip, "Type": "ip"},
    ]
    alert = {
        "TenantId": TENANT_ID, "TimeGenerated": stamp, "DisplayName": injection.title, "AlertName": injection.title,
        "AlertSeverity": injection.severity.value, "Description": description, "ProviderName": "MDATP",
        "VendorName": "Microsoft", "VendorOriginalId": alert_id, "SystemAlertId": alert_id,
        "ResourceId": "", "SourceComputerId": "", "AlertType": "InjectedDemoAlert", "ConfidenceLevel": "",
        "ConfidenceScore": None, "IsIncident": 0, "StartTime": stamp, "EndTime": stamp,
        "ProcessingEndTime": stamp, "RemediationSteps": "", "ExtendedProperties": "{}", "Entities":
        compact_json(entities), "SourceSystem": "Detection", "WorkspaceSubscriptionId": SUBSCRIPTION_ID,
        "WorkspaceResourceGroup": RESOURCE_GROUP, "ExtendedLinks": "", "ProductName": _PRODUCT,
        "ProductComponentName": "", "AlertLink": "", "Status": "New", "CompromisedEntity": injection.host,
        "Tactics": ",".join(tactics), "Techniques": "[]", "SubTechniques": "[]", "Type": "SecurityAlert",
    }
    return incident, alert
