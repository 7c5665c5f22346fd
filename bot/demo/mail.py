"""Mail and Office rows of the demo workspace: EmailEvents, EmailUrlInfo, UrlClickEvents and OfficeActivity.

A message is one EmailEvents row keyed by its NetworkMessageId, each of its links one EmailUrlInfo row with the
same id, and a click on a link one UrlClickEvents row with it too. The ordinary day: partners and colleagues
write to everyone, some links are clicked, files are opened in SharePoint and mailboxes read.
Rows are sparse dicts (``columns.stored_row`` fills the rest).
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from bot.demo.values import choice, compact_json, row_guid, timestamp
from bot.demo.world import Person, World

Rows = dict[str, list[dict]]

PARTNERS = (("orders@northwind.example", "198.51.100.20", "Your order has shipped"),
            ("newsletter@adatum.example", "198.51.100.21", "Adatum monthly update"),
            ("billing@litware.example", "198.51.100.22", "Statement for this month"))
PARTNER_LINKS = ("https://northwind.example/track", "https://adatum.example/news", "https://litware.example/billing")


def message_id(*parts: object) -> str:
    return row_guid("message", *parts)


def email(when: datetime, sender: str, sender_ip: str, recipient: Person, subject: str, network_id: str, *,
          urls: int = 0, attachments: int = 0, threats: str = "", delivery: str = "Delivered",
          location: str = "Inbox", latest: str = "") -> dict:
    """One EmailEvents row: an inbound message to ``recipient``."""
    stamp = timestamp(when)
    domain = sender.split("@")[-1]
    return {
        "TimeGenerated": stamp, "Timestamp": stamp, "NetworkMessageId": network_id,
        "InternetMessageId": f"<{network_id[:8]}@{domain}>", "SenderFromAddress": sender,
        "SenderMailFromAddress": sender, "SenderFromDomain": domain, "SenderMailFromDomain": domain,
        "SenderDisplayName": sender.split("@")[0], "SenderIPv4": sender_ip, "RecipientEmailAddress": recipient.upn,
        "RecipientObjectId": recipient.aad, "RecipientDomain": "contoso.com", "Subject": subject,
        "EmailDirection": "Inbound", "DeliveryAction": delivery, "DeliveryLocation": location,
        "LatestDeliveryAction": latest or delivery, "LatestDeliveryLocation": "Quarantine" if latest else location,
        "ThreatTypes": threats, "DetectionMethods": compact_json({threats: ["URL detonation reputation"]}) if threats
        else "", "UrlCount": urls, "AttachmentCount": attachments, "EmailSize": 24_000 + 1000 * attachments,
        "EmailLanguage": "en", "IsFirstContact": int(bool(threats)), "BulkComplaintLevel": 0,
        "ConfidenceLevel": compact_json({threats: "High"}) if threats else "",
        "AuthenticationDetails": compact_json({"SPF": "pass", "DKIM": "pass", "DMARC": "pass" if not threats
                                               else "fail"}),
        "To": compact_json([recipient.upn]), "ReportId": f"{network_id}-{recipient.aad[:8]}",
    }


def url_info(when: datetime, network_id: str, url: str) -> dict:
    stamp = timestamp(when)
    return {"TimeGenerated": stamp, "Timestamp": stamp, "NetworkMessageId": network_id, "Url": url,
            "UrlDomain": url.split("/")[2], "UrlLocation": "Body", "ReportId": f"{network_id}-url"}


def click(person: Person, when: datetime, network_id: str, url: str, ip: str, *, threats: str = "",
          action: str = "ClickAllowed") -> dict:
    stamp = timestamp(when)
    return {"TimeGenerated": stamp, "Timestamp": stamp, "AccountUpn": person.upn, "ActionType": action,
            "NetworkMessageId": network_id, "Url": url, "UrlChain": compact_json([url]), "IPAddress": ip,
            "IsClickedThrough": int(action == "ClickAllowed"), "ThreatTypes": threats, "Workload": "Email",
            "AppName": "Outlook", "DetectionMethods": "", "ReportId": f"{network_id}-click-{person.aad[:8]}"}


def office(person: Person, when: datetime, operation: str, workload: str, ip: str, **fields: str) -> dict:
    """One OfficeActivity row (Exchange or SharePoint audit)."""
    stamp = timestamp(when)
    row = {"TimeGenerated": stamp, "Start_Time": stamp, "Operation": operation, "OfficeWorkload": workload,
           "RecordType": "ExchangeAdmin" if workload == "Exchange" else "SharePointFileOperation",
           "UserId": person.upn, "UserKey": person.aad, "UserType": "Regular", "ClientIP": ip,
           "ResultStatus": "Succeeded" if workload == "Exchange" else "", "OrganizationName": "contoso.onmicrosoft.com",
           "OfficeId": row_guid("office", person.upn, stamp, operation), "Client_IPAddress": ip}
    row.update(fields)
    return row


def ordinary_day(world: World, rng: random.Random, day_start: datetime, volume: int, out: Rows) -> None:
    """Mail from partners to everyone (some with a link, a few clicked), files opened, a mailbox read."""
    for _ in range(volume):
        for person in world.users:
            ip = world.home_ips[person.upn]
            index = int(rng.random() * len(PARTNERS))
            sender, sender_ip, subject = PARTNERS[index]
            when = day_start + timedelta(hours=6 + rng.random() * 12)
            network_id = message_id(person.upn, timestamp(when))
            with_link = rng.random() < 0.5
            out["EmailEvents"].append(email(when, sender, sender_ip, person, subject, network_id,
                                            urls=int(with_link)))
            if with_link:
                out["EmailUrlInfo"].append(url_info(when, network_id, PARTNER_LINKS[index]))
                if rng.random() < 0.2:
                    out["UrlClickEvents"].append(click(person, when + timedelta(minutes=rng.random() * 90),
                                                       network_id, PARTNER_LINKS[index], ip))
            name = f"Budget_{choice(rng, ('Q1', 'Q2', 'Q3', 'Q4'))}.xlsx"
            out["OfficeActivity"].append(office(
                person, day_start + timedelta(hours=8 + rng.random() * 9), "FileAccessed", "SharePoint", ip,
                SourceFileName=name, Site_Url="https://contoso.sharepoint.com/sites/team/",
                OfficeObjectId=f"https://contoso.sharepoint.com/sites/team/Shared Documents/{name}"))
