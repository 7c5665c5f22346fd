"""The activity tables of one day: ordinary background activity, and the evidence behind each incident.

Background (``identity``, ``endpoint``, ``mail``, ``intel``): every person signs in from home, every machine logs
on, runs and connects, mail flows, the TI feed refreshes; scaled by the demo's volume (linearly up to 10x, then as
its square root: ``background_rounds``). Evidence: each incident's template has a story (``STORIES``) that writes,
from the incident's cast (the same accounts, hosts, addresses, files and URLs its alerts name), the rows its alerts
describe, in the two hours before it was created: the MFA-fatigue incident's denied pushes, the phishing incident's
delivery and click, the malware incident's process tree, file and connection, the TI match's indicator, the risky
user's detections, the new role's audit record.

Determinism: the day's background comes from a Random seeded by (seed, day), each incident's evidence from one
seeded by its IncidentName, so neither changes the incident and alert rows, nor one another.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.demo import endpoint, identity, intel, mail, security_log
from bot.demo.endpoint import EXPLORER, SSHD, Proc
from bot.demo.incidents import Incident
from bot.demo.values import compact_json, stable_int
from bot.demo.world import Machine, Person, World
from bot.sentinel.entities import entity_value

Rows = dict[str, list[dict]]
LEAD = timedelta(minutes=100)  # evidence starts this long before the incident is created (before its alerts)


@dataclass
class Scene:
    """One incident's story being written: who and what it names, when it starts, where rows go."""

    world: World
    rng: random.Random
    cast: dict
    start: datetime
    out: Rows
    person: Person
    closed_at: datetime | None = None  # when the incident was closed, and how: the risk it raised is then resolved
    outcome: str = ""

    def at(self, minutes: float) -> datetime:
        return self.start + timedelta(minutes=minutes)

    @property
    def machine(self) -> Machine:
        return self.world.machines[self.cast["host"]]

    def count(self, key: str, cap: int) -> int:
        """How many rows of a repeated event: the number the alert states, capped (volume stays reasonable)."""
        return max(1, min(int(self.cast[key]), cap))


BACKGROUND_LINEAR_UP_TO = 10  # volume up to which the ordinary activity grows with it; past it, as its square root


def background_rounds(volume: int) -> int:
    """How many rounds of ordinary activity a day holds at ``volume``: one per volume up to 10x, then growing as the
    square root (32 at 100x). The world's people are the same at every volume (more rounds are the same people
    signing in again), and the 100x database held 2.78 GB with linear rounds; the incidents' own evidence still
    grows with the incidents."""
    if volume <= BACKGROUND_LINEAR_UP_TO:
        return volume
    return round(BACKGROUND_LINEAR_UP_TO * math.sqrt(volume / BACKGROUND_LINEAR_UP_TO))


def day_rows(world: World, day_start: datetime, incidents: list[Incident], alerts: list[dict], volume: int,
             out: Rows) -> None:
    """Add one day's activity rows to ``out`` (table -> rows); ``alerts``: the day's SecurityAlert rows, whose
    sign-in alerts get the sign-in they describe."""
    rng = random.Random(stable_int("sentinel-demo", world.seed, "activity", day_start.toordinal()))
    out["IdentityInfo"].extend(identity.identity_info(world, day_start))
    out["DeviceInfo"].extend(endpoint.device_info(world, day_start))
    rounds = background_rounds(volume)
    identity.ordinary_day(world, rng, day_start, rounds, out)
    endpoint.ordinary_day(world, rng, day_start, rounds, out)
    mail.ordinary_day(world, rng, day_start, rounds, out)
    intel.listed_today(world, day_start, out)
    security_log.ordinary_day(world, rng, day_start, rounds, out)
    accounts = {p.upn: p for p in identity.people(world)}
    alert_signins(accounts, alerts, out)
    for incident in incidents:
        story = STORIES.get(incident.template.key)
        if story is not None:
            scene_rng = random.Random(stable_int("sentinel-demo", world.seed, "evidence", incident.name))
            story(Scene(world, scene_rng, incident.cast, incident.created - LEAD, out,
                        accounts[incident.cast["upn"]], incident.closed_at, incident.outcome))


# --------------------------------------------------------------------------------------------------
# Sign-ins and identity risk.

# Alerts about one sign-in (standalone noise included): the result code of the sign-in they describe.
SIGNIN_ALERTS = {"Unfamiliar sign-in properties": "0", "Activity from infrequent country": "0",
                 "Sign-ins from IPs that attempt sign-ins to disabled accounts": "50057"}


def alert_signins(accounts: dict[str, Person], alerts: list[dict], out: Rows) -> None:
    """The sign-in each sign-in alert names (its account from its address), once per alert, at its start."""
    seen: set[str] = set()
    for row in alerts:
        result = SIGNIN_ALERTS.get(row["AlertName"])
        if result is None or row["SystemAlertId"] in seen:
            continue
        seen.add(row["SystemAlertId"])
        upn, ip = _account_and_ip(json.loads(row["Entities"]))
        if upn in accounts and ip:
            when = datetime.fromisoformat(row["StartTime"][:-1])
            identity.add_signin(out, accounts[upn], when, ip, result=result, home=False)


def _account_and_ip(entities: list[dict]) -> tuple[str, str]:
    upn = ip = ""
    for item in entities:
        if item.get("Type") == "account" and "@" in (entity_value(item) or ""):  # its UPN, as the queries read it
            upn = entity_value(item) or ""
        elif item.get("Type") == "ip" and not ip:
            ip = item["Address"]
    return upn, ip


def _failures(s: Scene, code: str = "50126", cap: int = 20, app: tuple[str, int] | None = None) -> float:
    """Failed sign-ins from the attacker's address; returns the minute after the last one."""
    n = s.count("n", cap)
    for i in range(n):
        identity.add_signin(s.out, s.person, s.at(i * 0.5), s.cast["ip"], result=code, home=False, app=app)
    return n * 0.5


def _risk(s: Scene, minute: float, event_type: str, level: str, timing: str = "realtime") -> None:
    s.out["AADUserRiskEvents"].append(identity.risk_event(s.person, s.at(minute), s.cast["ip"], event_type, level,
                                                          timing))
    s.out["AADRiskyUsers"].append(identity.risky_user(s.person, s.at(minute + 5), level))
    if s.closed_at is not None:  # the analyst who closed the incident remediated or dismissed the user's risk
        remediated = s.outcome == "TruePositive"
        s.out["AADRiskyUsers"].append(identity.risky_user(
            s.person, s.closed_at, "none", "remediated" if remediated else "dismissed",
            "userPerformedSecuredPasswordReset" if remediated else "adminDismissedAllRiskForUser"))


def _unusual(s: Scene, minute: float, priority: int = 7) -> None:
    s.out["BehaviorAnalytics"].append(identity.behavior(s.person, s.at(minute), s.cast["ip"], "Sign-in", priority,
                                                        identity.UNUSUAL, home=False))


def failed_then_success(s: Scene) -> None:
    end = _failures(s)
    identity.add_signin(s.out, s.person, s.at(end + 2), s.cast["ip"], home=False)
    _risk(s, end + 3, "unfamiliarFeatures", "medium")
    _unusual(s, end + 2)


def brute_portal(s: Scene) -> None:
    _failures(s, app=("Azure Portal", 12260))


def password_spray(s: Scene) -> None:
    targets = [p for p in s.world.users if p is not s.person][: s.count("n", 20) - 1]
    for i, person in enumerate([s.person, *targets]):
        identity.add_signin(s.out, person, s.at(i * 0.3), s.cast["ip"], result="50126", home=False)
    for i in range(3):
        identity.add_signin(s.out, s.person, s.at(10 + i), s.cast["ip"], result="50053", home=False)


def impossible_travel(s: Scene) -> None:
    identity.add_signin(s.out, s.person, s.at(0), s.cast["ip2"])
    identity.add_signin(s.out, s.person, s.at(int(s.cast["minutes"])), s.cast["ip"], home=False)
    _risk(s, int(s.cast["minutes"]) + 1, "impossibleTravel", "medium")
    _unusual(s, int(s.cast["minutes"]))


def anonymous_ip(s: Scene) -> None:
    identity.add_signin(s.out, s.person, s.at(0), s.cast["ip"], home=False, risk="medium")
    _risk(s, 1, "anonymizedIPAddress", "medium")


def leaked_credentials(s: Scene) -> None:
    _risk(s, 0, "leakedCredentials", "high", timing="offline")


def mfa_fatigue(s: Scene) -> None:
    """Pushes the user denied (result 500121), then the one they approved."""
    denials = s.count("n2", 30)
    for i in range(denials):
        identity.add_signin(s.out, s.person, s.at(i * 14 / denials), s.cast["ip"], result="500121", home=False,
                            mfa=True)
    _risk(s, 15, "unfamiliarFeatures", "high")
    _unusual(s, 1, priority=8)


def keyvault(s: Scene) -> None:
    identity.add_signin(s.out, s.person, s.at(0), s.cast["ip"], home=False, app=("Azure Key Vault", 0))


# --------------------------------------------------------------------------------------------------
# The directory.


def privileged_role(s: Scene) -> None:
    actor = next(a for a in s.world.admins if a.upn == s.cast["actor"])
    role = [{"displayName": "Role.DisplayName", "oldValue": None, "newValue": f"\"{s.cast['role']}\""},
            {"displayName": "Role.TemplateId", "oldValue": None,
             "newValue": "\"62e90394-69f5-4237-9190-012177145e10\""}]
    s.out["AuditLogs"].append(identity.audit(s.at(0), "Add member to role", "RoleManagement", actor, s.person,
                                             s.cast["ip2"], role))


def oauth_consent(s: Scene) -> None:
    identity.add_signin(s.out, s.person, s.at(0), s.cast["ip"], home=False)
    scopes = [{"displayName": "ConsentAction.Permissions", "oldValue": None,
               "newValue": "\"Scope: Mail.Read Files.ReadWrite.All offline_access\""}]
    s.out["AuditLogs"].append(identity.audit(s.at(2), "Consent to application", "ApplicationManagement", s.person,
                                             None, s.cast["ip"], scopes, s.cast["oauth_app"], "ServicePrincipal"))


# --------------------------------------------------------------------------------------------------
# Mail and Office.


def phish_click(s: Scene) -> None:
    """Delivered, clicked, then removed by zero-hour auto purge; the attacker signs in afterwards."""
    network_id = mail.message_id(s.cast["upn"], s.cast["url"], s.start)
    s.out["EmailEvents"].append(mail.email(s.at(0), s.cast["sender"], s.cast["ip"], s.person, s.cast["subject"],
                                           network_id, urls=1, threats="Phish", latest="Moved to quarantine"))
    s.out["EmailUrlInfo"].append(mail.url_info(s.at(0), network_id, s.cast["url"]))
    s.out["UrlClickEvents"].append(mail.click(s.person, s.at(12), network_id, s.cast["url"],
                                              s.world.home_ips[s.person.upn], threats="Phish"))
    identity.add_signin(s.out, s.person, s.at(40), s.cast["ip"], home=False)


def malware_attachment(s: Scene) -> None:
    network_id = mail.message_id(s.cast["upn"], s.cast["file"], s.start)
    s.out["EmailEvents"].append(mail.email(s.at(0), s.cast["sender"], s.cast["ip"], s.person, s.cast["subject"],
                                           network_id, attachments=1, threats="Malware",
                                           latest="Moved to quarantine"))


def inbox_forwarding(s: Scene) -> None:
    parameters = [{"Name": "Name", "Value": s.cast["rule"]}, {"Name": "ForwardTo", "Value": s.cast["fwd"]},
                  {"Name": "SubjectOrBodyContainsWords", "Value": "invoice;payment;wire"},
                  {"Name": "MarkAsRead", "Value": "True"}]
    s.out["OfficeActivity"].append(mail.office(s.person, s.at(0), "New-InboxRule", "Exchange", s.cast["ip"],
                                               Parameters=compact_json(parameters)))


def mass_download(s: Scene) -> None:
    for i in range(s.count("n", 40)):
        name = f"Contract_{i:03d}.pdf"
        s.out["OfficeActivity"].append(mail.office(
            s.person, s.at(i * 0.2), "FileDownloaded", "SharePoint", s.cast["ip"], SourceFileName=name,
            Site_Url="https://contoso.sharepoint.com/sites/finance/",
            OfficeObjectId=f"https://contoso.sharepoint.com/sites/finance/Shared Documents/{name}"))


# --------------------------------------------------------------------------------------------------
# Endpoints.


def _remote_ip(s: Scene) -> str:
    return s.cast["ip"]


def process_tree(s: Scene) -> None:
    """The malicious process under its parent, the file it dropped, its connection out (and a known-bad hash)."""
    c, machine, account = s.cast, s.machine, s.cast["sam"]
    linux = machine.os == "Linux"
    parent = SSHD if linux else Proc(EXPLORER.folder, c["parent"], c["parent"])
    child = Proc(c["cmd_dir"], c["cmd_image"], c["cmd"] or c["cmd_image"], c["proc_sha256"])
    s.out["DeviceProcessEvents"].append(endpoint.process(machine, s.at(0), account, child, parent, c["upn"]))
    if not linux:
        s.out["DeviceFileEvents"].append(endpoint.file_event(machine, s.at(1), account, child, c["file_dir"],
                                                             c["file"], c["sha256"], origin_url=c["url"]))
    s.out["DeviceNetworkEvents"].append(endpoint.network(machine, s.at(2), account, child, _remote_ip(s),
                                                         c["domain"]))
    if not linux:
        s.out["SecurityEvent"].append(security_log.process(machine, s.at(0), account, child,
                                                           f"{parent.folder}\\{parent.file}"))
    s.out["CommonSecurityLog"].append(security_log.firewall(s.at(2), machine.ip, _remote_ip(s), 443, "allow",
                                                            f"https://{c['domain']}/", "GET", 900, 250_000))
    if stable_int(c["sha256"]) % 2 == 0:
        intel.add(s.out, intel.Indicator("file", c["sha256"], "malware", 90), s.at(-60 * 24))


def personal_upload(s: Scene) -> None:
    browser = endpoint.USUAL_PROCESSES[1]
    s.out["DeviceNetworkEvents"].append(endpoint.network(s.machine, s.at(0), s.cast["sam"], browser, s.cast["ip"],
                                                         s.cast["url"]))
    s.out["CommonSecurityLog"].append(security_log.firewall(s.at(0), s.machine.ip, s.cast["ip"], 443, "allow",
                                                            s.cast["url"], "POST", 850_000_000, 12_000))


def rdp(s: Scene) -> None:
    target = s.world.machines[s.cast["host2"]]
    s.out["DeviceLogonEvents"].append(endpoint.logon(target, s.at(0), s.cast["sam"], "RemoteInteractive",
                                                     remote_ip=s.cast["host_ip"], remote_device=s.cast["host"]))
    _windows_logon(s, target, s.cast["host_ip"])


def _windows_logon(s: Scene, machine: Machine, ip: str) -> None:
    """The Windows agent's view of a remote logon: a few failures (4625), then the success (4624, type 10)."""
    if machine.os != "Windows":
        return
    for i in range(3):
        s.out["SecurityEvent"].append(security_log.logon(machine, s.at(-3 + i * 0.5), s.cast["sam"], 10, ip,
                                                         failed=True))
    s.out["SecurityEvent"].append(security_log.logon(machine, s.at(0), s.cast["sam"], 10, ip))


def service_account_logon(s: Scene) -> None:
    s.out["DeviceLogonEvents"].append(endpoint.logon(s.machine, s.at(0), s.cast["sam"], "RemoteInteractive",
                                                     remote_ip=s.cast["host_ip"]))
    _windows_logon(s, s.machine, s.cast["host_ip"])


def beaconing(s: Scene) -> None:
    proc = endpoint.USUAL_PROCESSES[4]
    step = int(s.cast["interval"]) / 60
    for i in range(12):
        s.out["DeviceNetworkEvents"].append(endpoint.network(s.machine, s.at(i * step), "system", proc,
                                                             s.cast["ip"], s.cast["domain"]))
        s.out["CommonSecurityLog"].append(security_log.firewall(s.at(i * step), s.machine.ip, s.cast["ip"], 443,
                                                                "allow", f"https://{s.cast['domain']}/", "GET", 400,
                                                                1_200))


def ti_domain(s: Scene) -> None:
    intel.add(s.out, intel.Indicator("domain-name", s.cast["domain"], s.cast["ti_label"], 85), s.at(-60 * 24 * 2))
    s.out["DeviceNetworkEvents"].append(endpoint.network(s.machine, s.at(0), s.cast["sam"],
                                                         endpoint.USUAL_PROCESSES[1], s.cast["ip"], s.cast["domain"]))
    s.out["CommonSecurityLog"].append(security_log.firewall(s.at(0), s.machine.ip, s.cast["ip"], 443, "allow",
                                                            f"https://{s.cast['domain']}/", "GET", 1_500, 30_000))


def ssh_brute(s: Scene) -> None:
    for i in range(s.count("n", 30)):
        s.out["DeviceLogonEvents"].append(endpoint.logon(s.machine, s.at(i * 0.2), s.cast["sam"], "Network",
                                                         "LogonFailed", remote_ip=s.cast["ip"]))
        s.out["CommonSecurityLog"].append(security_log.firewall(s.at(i * 0.2), s.cast["ip"], s.machine.ip, 22,
                                                                "allow", sent=3_000, received=2_000))


def blocked_traffic(s: Scene) -> None:
    s.out["DeviceNetworkEvents"].append(endpoint.network(s.machine, s.at(0), "root", SSHD, s.cast["ip"], port=22,
                                                         action="InboundConnectionAccepted"))
    for i in range(3):  # the firewall denied the address's earlier tries on other ports
        s.out["CommonSecurityLog"].append(security_log.firewall(s.at(-5 + i), s.cast["ip"], s.machine.ip,
                                                                (3389, 445, 23)[i], "deny"))


_PROCESS_STORIES = ("powershell", "ransomware", "lsass", "rare_service", "defender_tamper", "log_cleared",
                    "scheduled_task", "exploration", "malware_outbreak", "crypto_mining")
STORIES: dict[str, Callable[[Scene], None]] = {
    "failed_then_success": failed_then_success, "brute_portal": brute_portal, "password_spray": password_spray,
    "impossible_travel": impossible_travel, "anonymous_ip": anonymous_ip, "leaked_credentials": leaked_credentials,
    "mfa_fatigue": mfa_fatigue, "keyvault": keyvault, "privileged_role": privileged_role,
    "oauth_consent": oauth_consent, "phish_click": phish_click, "malware_attachment": malware_attachment,
    "inbox_forwarding": inbox_forwarding, "mass_download": mass_download, "personal_upload": personal_upload,
    "rdp": rdp, "service_account_logon": service_account_logon, "beaconing": beaconing, "ti_domain": ti_domain,
    "ssh_brute": ssh_brute, "blocked_traffic": blocked_traffic, **dict.fromkeys(_PROCESS_STORIES, process_tree),
}
