"""SecurityAlert rows: an incident's alerts, a burst's alerts, the standalone noise, and status updates.

``alert_row`` gives an alert the columns its product fills (Sentinel rule alerts carry the rule's query
and period; the Defender products their own ids, links, confidence and remediation steps, a JSON array of
strings). StartTime and EndTime bracket the activity shortly before the alert's TimeGenerated. An alert whose
status changes later is emitted again by ``status_update`` with the same SystemAlertId and a later TimeGenerated.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.demo.catalog import (
    PRODUCTS,
    RESOURCE_GROUP,
    SCANNER_IP,
    SEVERITIES,
    SUBSCRIPTION_ID,
    SYS32,
    TENANT_ID,
)
from bot.demo.entities import alert_entities
from bot.demo.templates import (
    ALERT_DESCRIPTIONS,
    NOISE,
    NOISE_CUMULATIVE,
    NOISE_QUERIES,
    PRODUCT_REMEDIATION,
    TEMPLATES,
    AlertSpec,
    Template,
)
from bot.demo.values import choice, compact_json, describe, fill, guid, randrange, timestamp, weighted_index
from bot.demo.world import World, draw_cast

_TECHNIQUE_COLUMNS = {spec: spec.technique_columns() for spec in
                      [a for t in TEMPLATES for a in t.alerts] + [n[0] for n in NOISE]}


def alert_row(world: World, rng: random.Random, spec: AlertSpec, cast: dict, generated: datetime,
              severity: str, template: Template | None, status: str = "New") -> dict:
    product_name, provider, component = PRODUCTS[spec.product]
    name = fill(spec.name, cast)
    techniques, sub_techniques = _TECHNIQUE_COLUMNS[spec]
    end = generated - timedelta(seconds=rng.uniform(30, 900))
    start = end - timedelta(seconds=choice(rng, (0, 0, rng.uniform(60, 2700))))
    vendor_id = guid(rng)
    if spec.product == "SENT":
        parts = _rule_parts(world, rng, spec, generated, template, vendor_id)
    else:
        parts = _defender_parts(rng, spec, cast, template, vendor_id)
    return {
        "AlertLink": parts.link, "AlertName": name, "AlertSeverity": severity, "AlertType": parts.alert_type,
        "CompromisedEntity": _compromised(spec.entities, cast), "ConfidenceLevel": parts.confidence_level,
        "ConfidenceScore": parts.confidence_score, "Description": _description(spec, cast, template),
        "DisplayName": name, "EndTime": timestamp(end),
        "Entities": compact_json(alert_entities(spec.entities, cast, rng, start)), "ExtendedLinks": "",
        "ExtendedProperties": compact_json(parts.properties), "IsIncident": 0,
        "ProcessingEndTime": timestamp(generated - timedelta(microseconds=randrange(rng, 20_000, 500_000))),
        "ProductComponentName": component, "ProductName": product_name, "ProviderName": provider,
        "RemediationSteps": _remediation(spec, template), "ResourceId": parts.resource_id,
        "SourceComputerId": "", "SourceSystem": "Detection", "StartTime": timestamp(start), "Status": status,
        "SubTechniques": sub_techniques, "SystemAlertId": guid(rng), "Tactics": ",".join(spec.tactics),
        "Techniques": techniques, "TenantId": TENANT_ID, "TimeGenerated": timestamp(generated),
        "Type": "SecurityAlert", "VendorName": "Microsoft", "VendorOriginalId": parts.vendor_id,
        "WorkspaceResourceGroup": RESOURCE_GROUP, "WorkspaceSubscriptionId": SUBSCRIPTION_ID,
    }


@dataclass
class _ProductParts:
    """The columns of an alert its product fills its own way."""

    alert_type: str
    properties: dict
    vendor_id: str
    link: str = ""
    resource_id: str = ""
    confidence_level: str = ""
    confidence_score: float | None = None


def _compromised(kinds: tuple[str, ...], cast: dict) -> str:
    if "host" in kinds:
        return cast["host"]
    if "account" in kinds or "mailbox" in kinds:
        return cast["upn"]
    return ""


def _remediation(spec: AlertSpec, template: Template | None) -> str:
    """RemediationSteps as the products write it: a JSON array of strings; "" for Sentinel's scheduled rules."""
    steps = (template.remediation if template else ()) or PRODUCT_REMEDIATION.get(spec.product, ())
    return compact_json(list(steps)) if steps else ""


def _description(spec: AlertSpec, cast: dict, template: Template | None) -> str:
    source = ALERT_DESCRIPTIONS.get(spec.name) or (template.description if template else spec.name + ".")
    return describe(source, cast)


def _rule_parts(world: World, rng: random.Random, spec: AlertSpec, generated: datetime, template: Template | None,
                vendor_id: str) -> _ProductParts:
    """A Sentinel scheduled rule's alert: the rule's id, query and the window it ran over."""
    rule_id = world.rule_id(spec.name)
    query_end = generated - timedelta(seconds=rng.uniform(20, 120))
    period = template.period if template else "01:00:00"
    hours = _period_hours(period)
    properties = {
        "Query Period": period, "Trigger Operator": "GreaterThan", "Trigger Threshold": "0",
        "Correlation Id": guid(rng), "Search Query Results Overall Count": str(randrange(rng, 1, 40)),
        "Data Sources": "[]", "Query": template.query if template else NOISE_QUERIES.get(spec.name, ""),
        "Query Start Time UTC": (query_end - timedelta(hours=hours)).strftime("%Y-%m-%d %H:%M:%SZ"),
        "Query End Time UTC": query_end.strftime("%Y-%m-%d %H:%M:%SZ"),
        "Analytic Rule Ids": compact_json([rule_id]), "Event Grouping": "SingleAlert",
        "Analytic Rule Name": spec.name,
        "ProcessedBySentinel": "True", "Alert generation status": "Full alert created",
    }
    return _ProductParts(f"{TENANT_ID}_{rule_id}", properties, vendor_id)


def _defender_parts(rng: random.Random, spec: AlertSpec, cast: dict, template: Template | None,
                    vendor_id: str) -> _ProductParts:
    """A Defender product's alert: its own ids, link, properties and confidence."""
    parts = _DEFENDER[spec.product](rng, spec, cast, template, vendor_id)
    if "process" in spec.entities:
        parts.properties["Command Line"] = cast["cmd"]
    parts.properties.update({"ProcessedBySentinel": "True", "Alert generation status": "Full alert created"})
    return parts


def _endpoint(rng: random.Random, spec: AlertSpec, cast: dict, template: Template | None,
              vendor_id: str) -> _ProductParts:
    vendor_id = f"da{randrange(rng, 10**17, 10**18)}_{randrange(rng, -2**31, 2**31)}"
    detection = "EDR" if "Av" not in spec.alert_type else "Antivirus"
    group = "Contoso-Workstations" if cast["host"].startswith(("WS", "LT")) else "Contoso-Servers"
    properties = {"Category": spec.tactics[0], "DetectionSource": detection, "MachineGroup": group}
    return _ProductParts(spec.alert_type, properties, vendor_id, link=f"https://security.microsoft.com/alerts/{vendor_id}")


def _identity(rng: random.Random, spec: AlertSpec, cast: dict, template: Template | None,
              vendor_id: str) -> _ProductParts:
    vendor_id = f"{rng.getrandbits(192):048x}"
    properties = {"State": "Open", "Request Id": guid(rng), "User Account": cast["upn"],
                  "Client IP Address": cast["ip"], "Client Location": f"{cast['city']}, {cast['country']}"}
    level = choice(rng, ("Low", "Medium", "High"))
    return _ProductParts(spec.alert_type, properties, vendor_id, confidence_level=level,
                         confidence_score=round(rng.uniform(0.3, 0.95), 2),
                         link=f"https://security.microsoft.com/alerts/ad{vendor_id}")


def _office(rng: random.Random, spec: AlertSpec, cast: dict, template: Template | None,
            vendor_id: str) -> _ProductParts:
    properties = {"Category": "ThreatManagement", "Investigation Id": guid(rng),
                  "Sender": cast["sender"], "Subject": cast["subject"]}
    return _ProductParts(spec.alert_type, properties, vendor_id,
                         link=f"https://security.microsoft.com/viewalerts?id={vendor_id}")


def _cloud_apps(rng: random.Random, spec: AlertSpec, cast: dict, template: Template | None,
                vendor_id: str) -> _ProductParts:
    vendor_id = f"{rng.getrandbits(96):024x}"
    properties = {"App": cast["app"], "Client IP Address": cast["ip"], "User": cast["upn"]}
    level = choice(rng, ("Low", "Medium", "High"))
    return _ProductParts(spec.alert_type, properties, vendor_id,
                         link=f"https://security.microsoft.com/cloudapps/alerts/{vendor_id}",
                         confidence_level=level, confidence_score=round(rng.uniform(0.4, 0.99), 2))


def _cloud(rng: random.Random, spec: AlertSpec, cast: dict, template: Template | None,
           vendor_id: str) -> _ProductParts:
    vendor_id = f"{randrange(rng, 10**18, 10**19)}_{guid(rng)}"
    if template is not None and template.resource == "keyvault":
        resource_id = (f"/subscriptions/{SUBSCRIPTION_ID}/resourceGroups/prod-security-rg/providers/"
                       "Microsoft.KeyVault/vaults/kv-prod-secrets")
        properties = {"resourceType": "Key Vault", "Client IP Address": cast["ip"], "User": cast["upn"]}
    else:
        resource_id = (f"/subscriptions/{SUBSCRIPTION_ID}/resourceGroups/prod-workloads-rg/providers/"
                       f"Microsoft.Compute/virtualMachines/{cast['host']}")
        properties = {"resourceType": "Virtual Machine", "Compromised Host": cast["host"]}
    link = (f"https://portal.azure.com/#blade/Microsoft_Azure_Security_AzureDefenderForData/AlertBlade/"
            f"alertId/{vendor_id}/subscriptionId/{SUBSCRIPTION_ID}/resourceGroup/prod-workloads-rg/"
            "referencedFrom/alertDeepLink/location/westeurope")
    return _ProductParts(spec.alert_type, properties, vendor_id, link=link, resource_id=resource_id,
                         confidence_score=1.0)


# Each Defender product's parts, by its key in PRODUCTS (every product but Sentinel's own rules, "SENT").
_DEFENDER: dict[str, Callable[[random.Random, AlertSpec, dict, Template | None, str], _ProductParts]] = {
    "MDE": _endpoint, "IPC": _identity, "MDO": _office, "MDA": _cloud_apps, "MDC": _cloud,
}


def _period_hours(period: str) -> float:
    days, _, clock = period.rpartition(".")
    hours, minutes, _seconds = (int(x) for x in clock.split(":"))
    return (int(days) if days else 0) * 24 + hours + minutes / 60


def status_update(row: dict, when: datetime, status: str) -> dict:
    """The same alert re-emitted with a new status (Sentinel appends a row; consumers take the latest)."""
    updated = dict(row)
    updated["Status"] = status
    updated["TimeGenerated"] = timestamp(when)
    updated["ProcessingEndTime"] = timestamp(when - timedelta(milliseconds=120))
    return updated


def burst_alert(world: World, rng: random.Random, template: Template, base: dict, moment: datetime) -> dict:
    """One alert of a burst: the burst's source address or malware, on another user's device."""
    cast = dict(base)
    person = choice(rng, world.users)
    cast.update(user=person.display, sam=person.sam, upn=person.upn, aad=person.aad, host=person.host,
                host_ip=world.machines[person.host].ip, host_os="Windows")
    cast["file_dir"] = fill(cast["file_dir_raw"], cast)
    if template.key == "password_spray":
        spec, severity = template.alerts[0], "Medium"
    else:
        active = rng.random() < 0.2
        spec = template.alerts[1 if active else 0]
        severity = "High" if active else "Low"
    return alert_row(world, rng, spec, cast, moment, severity, template)


def noise_alerts(world: World, rng: random.Random, day_start: datetime) -> list[dict]:
    """Standalone low-severity alerts: a steady trickle (never an hour without one) plus working-hours extras."""
    day_end = day_start + timedelta(days=1)
    times = []
    moment = day_start + timedelta(minutes=rng.uniform(1, 20))
    while moment < day_end:
        times.append(moment)
        moment += timedelta(minutes=rng.uniform(18, 55))
    if times[-1] < day_end - timedelta(minutes=35):  # no long pause across midnight either
        times.append(day_end - timedelta(minutes=rng.uniform(2, 35)))
    times += [day_start + timedelta(hours=rng.uniform(8, 18)) for _ in range(randrange(rng, 0, 13))]
    times.sort()
    rows = []
    for moment in times:
        point = rng.random() * NOISE_CUMULATIVE[-1]
        spec, weights, _w, host_kind, user_kind = NOISE[bisect.bisect_right(NOISE_CUMULATIVE, point)]
        severity = SEVERITIES[weighted_index(rng, weights)]
        hostile = rng.random() < 1 / 40
        commands = ((SYS32, "net.exe", "net.exe user /domain"),) if "process" in spec.entities else ()
        files = (("C:\\Users\\{sam}\\Downloads", "{pua}_setup.exe"),) if "{pua}" in spec.name else ()
        cast = draw_cast(world, rng, host_kind, user_kind, severity, commands, files, hostile=hostile, light=True)
        if "scanner_ip" in spec.entities:
            # Mostly the authorised vulnerability scanner, sometimes an outside address.
            cast["scanner_ip"] = SCANNER_IP if rng.random() < 0.9 else choice(rng, world.attacker_ips)
            cast["ip"] = cast["scanner_ip"]
        status = "New"
        roll = rng.random()
        if spec.product != "SENT" and roll < 0.12:
            status = "Resolved"
        elif spec.product != "SENT" and roll < 0.15:
            status = "Dismissed"
        row = alert_row(world, rng, spec, cast, moment, severity, None, status=status)
        rows.append(row)
        if status == "New" and spec.product != "SENT" and rng.random() < 0.06:
            rows.append(status_update(row, moment + timedelta(hours=rng.uniform(1, 30)), "Resolved"))
    return rows
