"""Endpoint rows of the demo workspace (Defender for Endpoint's advanced hunting tables).

DeviceInfo (one snapshot per machine per day), DeviceProcessEvents (a process and the one that started it),
DeviceNetworkEvents, DeviceLogonEvents and DeviceFileEvents, and the ordinary day of every machine: its user's
logon, the usual processes, connections to the usual services, a downloaded document; servers run their jobs.
Rows are sparse dicts (``columns.stored_row`` fills the rest).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache

from bot.demo.values import choice, row_guid, timestamp
from bot.demo.world import Machine, Person, World

Rows = dict[str, list[dict]]


@dataclass(frozen=True)
class Proc:
    """A process as the events name it: its folder, file, command line and hash."""

    folder: str
    file: str
    command: str
    sha256: str = ""

    def hash(self) -> str:
        return self.sha256 or file_hash(self.file)


@cache
def file_hash(name: str) -> str:
    """A stable SHA-256 for a well-known file (the same binary everywhere)."""
    return hashlib.sha256(f"demo-binary|{name.lower()}".encode()).hexdigest()


@cache
def device_id(name: str) -> str:
    return hashlib.sha1(f"demo-device|{name}".encode()).hexdigest()


EXPLORER = Proc("C:\\Windows", "explorer.exe", "C:\\Windows\\Explorer.EXE")
SERVICES = Proc("C:\\Windows\\System32", "services.exe", "C:\\Windows\\system32\\services.exe")
SSHD = Proc("/usr/sbin", "sshd", "/usr/sbin/sshd -D")
USUAL_PROCESSES = (
    Proc("C:\\Program Files\\Microsoft Office\\root\\Office16", "OUTLOOK.EXE", "\"OUTLOOK.EXE\""),
    Proc("C:\\Program Files (x86)\\Microsoft\\Edge\\Application", "msedge.exe",
         "\"msedge.exe\" --profile-directory=Default"),
    Proc("C:\\Program Files\\Microsoft Office\\root\\Office16", "EXCEL.EXE", "\"EXCEL.EXE\" /dde"),
    Proc("C:\\Users\\Public\\AppData\\Local\\Microsoft\\Teams", "ms-teams.exe", "ms-teams.exe --system-initiated"),
    Proc("C:\\Windows\\System32", "svchost.exe", "svchost.exe -k netsvcs -p -s Schedule"),
)
SERVER_PROCESSES = (
    Proc("C:\\Program Files\\Backup", "backupagent.exe", "backupagent.exe /run nightly"),
    Proc("C:\\Windows\\System32", "wsmprovhost.exe", "C:\\Windows\\system32\\wsmprovhost.exe -Embedding"),
)
USUAL_DESTINATIONS = (("outlook.office365.com", "52.96.166.130"), ("contoso.sharepoint.com", "13.107.136.9"),
                      ("login.microsoftonline.com", "20.190.151.7"), ("teams.microsoft.com", "52.113.194.132"),
                      ("www.bing.com", "204.79.197.200"))


def _base(machine: Machine, when: datetime) -> dict:
    stamp = timestamp(when)
    return {"TimeGenerated": stamp, "Timestamp": stamp, "DeviceId": device_id(machine.name),
            # The short name in lower case (as Defender shows a device), so an entity matches it case-insensitively.
            "DeviceName": machine.name.lower(),
            "ReportId": int(when.timestamp()) % 10_000_000}


def _initiating(parent: Proc, account: str, when: datetime) -> dict:
    return {"InitiatingProcessFileName": parent.file, "InitiatingProcessFolderPath": parent.folder,
            "InitiatingProcessCommandLine": parent.command, "InitiatingProcessSHA256": parent.hash(),
            "InitiatingProcessAccountName": account, "InitiatingProcessAccountDomain": "contoso",
            "InitiatingProcessId": 1000 + int(parent.hash()[:4], 16) % 9000,
            "InitiatingProcessCreationTime": timestamp(when - timedelta(minutes=3)),
            "InitiatingProcessIntegrityLevel": "Medium"}


def process(machine: Machine, when: datetime, account: str, proc: Proc, parent: Proc, upn: str = "") -> dict:
    """A DeviceProcessEvents row: ``parent`` started ``proc`` as ``account``."""
    row = _base(machine, when)
    row.update(_initiating(parent, account, when))
    row.update({"ActionType": "ProcessCreated", "FileName": proc.file, "FolderPath": f"{proc.folder}\\{proc.file}",
                "ProcessCommandLine": proc.command, "SHA256": proc.hash(), "AccountName": account,
                "AccountDomain": "contoso", "AccountUpn": upn, "ProcessId": 2000 + int(proc.hash()[:4], 16) % 20000,
                "ProcessCreationTime": row["Timestamp"], "ProcessIntegrityLevel": "Medium", "FileSize": 120_000,
                "InitiatingProcessParentFileName": "explorer.exe" if parent is not EXPLORER else "userinit.exe"})
    return row


def network(machine: Machine, when: datetime, account: str, proc: Proc, remote_ip: str, remote_url: str = "",
            port: int = 443, action: str = "ConnectionSuccess") -> dict:
    row = _base(machine, when)
    row.update(_initiating(proc, account, when))
    row.update({"ActionType": action, "RemoteIP": remote_ip, "RemotePort": port, "RemoteUrl": remote_url,
                "LocalIP": machine.ip, "LocalPort": 49152 + int(when.timestamp()) % 16000, "Protocol": "Tcp",
                "RemoteIPType": "Private" if remote_ip.startswith("10.") else "Public"})
    return row


def logon(machine: Machine, when: datetime, account: str, logon_type: str, action: str = "LogonSuccess",
          remote_ip: str = "", remote_device: str = "") -> dict:
    row = _base(machine, when)
    row.update({"ActionType": action, "AccountName": account, "AccountDomain": "contoso", "LogonType": logon_type,
                "RemoteIP": remote_ip, "RemoteDeviceName": remote_device, "Protocol": "Kerberos" if
                logon_type != "Network" else "NTLM", "IsLocalAdmin": 0,
                "LogonId": int(when.timestamp()) % 1_000_000, "FailureReason": "" if action == "LogonSuccess"
                else "InvalidUserNameOrPassword"})
    return row


def file_event(machine: Machine, when: datetime, account: str, proc: Proc, folder: str, name: str, sha256: str,
               action: str = "FileCreated", origin_url: str = "") -> dict:
    row = _base(machine, when)
    row.update(_initiating(proc, account, when))
    row.update({"ActionType": action, "FileName": name, "FolderPath": f"{folder}\\{name}", "SHA256": sha256,
                "FileSize": 48_000, "FileOriginUrl": origin_url})
    return row


def device_info(world: World, day_start: datetime) -> list[dict]:
    """DeviceInfo: one snapshot row per machine per day, with its user."""
    owners = {p.host: p for p in world.users}
    rows = []
    for machine in world.machines.values():
        row = _base(machine, day_start + timedelta(hours=1))
        windows = machine.os == "Windows"
        owner = owners.get(machine.name)
        row.update({"OSPlatform": "Windows11" if windows else "Linux", "OSDistribution": "" if windows else "Ubuntu",
                    "OSVersion": "10.0" if windows else "22.04", "OSBuild": 22631 if windows else None,
                    "DeviceType": "Workstation" if owner else "Server", "OnboardingStatus": "Onboarded",
                    "SensorHealthState": "Active", "IsAzureADJoined": int(windows), "JoinType": "Hybrid Azure AD Join"
                    if windows else "", "PublicIP": "192.0.2.1", "MachineGroup": "Contoso", "Vendor": "Microsoft",
                    "AadDeviceId": row_guid("aad-device", machine.name) if windows else "",
                    "ExposureLevel": "Medium", "AssetValue": "High" if machine.name.startswith("SRV-DC") else "Normal",
                    "LoggedOnUsers": _logged_on(owner), "IsInternetFacing": int(machine.name.startswith("vm-web"))})
        rows.append(row)
    return rows


@cache
def _logged_on(owner: Person | None) -> str:
    if owner is None:
        return "[]"
    return f'[{{"UserName":"{owner.sam}","DomainName":"CONTOSO","Sid":""}}]'


def ordinary_day(world: World, rng: random.Random, day_start: datetime, volume: int, out: Rows) -> None:
    """A working day on every user's machine, and the servers' jobs."""
    for _ in range(volume):
        for person in world.users:
            machine = world.machines[person.host]
            start = day_start + timedelta(hours=7 + rng.random() * 3)
            out["DeviceLogonEvents"].append(logon(machine, start, person.sam, "Interactive"))
            proc = choice(rng, USUAL_PROCESSES)
            out["DeviceProcessEvents"].append(
                process(machine, start + timedelta(minutes=rng.random() * 480), person.sam, proc, EXPLORER, person.upn))
            url, ip = choice(rng, USUAL_DESTINATIONS)
            out["DeviceNetworkEvents"].append(
                network(machine, start + timedelta(minutes=rng.random() * 480), person.sam, USUAL_PROCESSES[1], ip,
                        url))
            if rng.random() < 0.3:
                name = f"Report_{rng.randrange(1000, 9999)}.docx"
                out["DeviceFileEvents"].append(
                    file_event(machine, start + timedelta(minutes=rng.random() * 480), person.sam, USUAL_PROCESSES[1],
                               f"C:\\Users\\{person.sam}\\Downloads", name, file_hash(name),
                               origin_url=f"https://contoso.sharepoint.com/sites/team/{name}"))
        _server_day(world, rng, day_start, out)


def _server_day(world: World, rng: random.Random, day_start: datetime, out: Rows) -> None:
    service = world.service.sam
    for name in ("SRV-BKP-01", "SRV-FS-01", "SRV-SQL-02"):
        machine = world.machines[name]
        when = day_start + timedelta(hours=1 + rng.random() * 3)
        out["DeviceLogonEvents"].append(logon(machine, when, service, "Service"))
        out["DeviceProcessEvents"].append(process(machine, when, service, choice(rng, SERVER_PROCESSES), SERVICES))
