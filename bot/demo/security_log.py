"""Windows security events (SecurityEvent) and the firewall's CEF log (CommonSecurityLog) of the demo workspace.

The ordinary day: every Windows machine's user logs on (4624, interactive) and starts a usual process (4688), and
the perimeter firewall allows the usual outbound traffic. The incidents' stories (``activity.STORIES``) leave their
rows here too, as the Windows agent and the firewall would see them: failed logons (4625) then the remote logon
(4624, type 10) on the attacked host, the malicious process's creation (4688) with its command line, the firewall
denying or allowing the attacker's address. Rows are sparse dicts (``columns.stored_row`` fills the rest).
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from bot.demo.endpoint import USUAL_DESTINATIONS, USUAL_PROCESSES, Proc
from bot.demo.values import choice, timestamp
from bot.demo.world import Machine, World

Rows = dict[str, list[dict]]
DOMAIN = "CONTOSO"
_ACTIVITY = {4624: "4624 - An account was successfully logged on.", 4625: "4625 - An account failed to log on.",
             4688: "4688 - A new process has been created."}
_LOGON_TYPES = {2: "2 - Interactive", 3: "3 - Network", 5: "5 - Service", 10: "10 - RemoteInteractive"}
FIREWALL = "FW-EDGE-01"


def _event(machine: Machine, when: datetime, event_id: int, account: str) -> dict:
    return {"TimeGenerated": timestamp(when), "Computer": f"{machine.name}.contoso.com", "EventID": event_id,
            "Activity": _ACTIVITY[event_id], "Channel": "Security", "EventSourceName":
            "Microsoft-Windows-Security-Auditing", "Level": "8" if event_id != 4625 else "16",
            "Account": f"{DOMAIN}\\{account}", "AccountType": "Machine" if account.endswith("$") else "User"}


def logon(machine: Machine, when: datetime, account: str, logon_type: int, ip: str = "-",
          failed: bool = False) -> dict:
    """A 4624 (or a failed 4625) on ``machine`` for ``account`` from ``ip``."""
    row = _event(machine, when, 4625 if failed else 4624, account)
    row.update({"LogonType": logon_type, "LogonTypeName": _LOGON_TYPES.get(logon_type, str(logon_type)),
                "TargetUserName": account, "TargetDomainName": DOMAIN, "TargetAccount": f"{DOMAIN}\\{account}",
                "IpAddress": ip, "WorkstationName": machine.name, "LogonProcessName": "User32" if logon_type != 3
                else "NtLmSsp", "AuthenticationPackageName": "Negotiate" if logon_type != 3 else "NTLM",
                "Status": "0xc000006d" if failed else "", "SubStatus": "0xc000006a" if failed else ""})
    return row


def process(machine: Machine, when: datetime, account: str, proc: Proc, parent: str) -> dict:
    """A 4688: ``account`` started ``proc`` under ``parent`` (a full path)."""
    row = _event(machine, when, 4688, account)
    row.update({"NewProcessName": f"{proc.folder}\\{proc.file}", "Process": proc.file, "CommandLine": proc.command,
                "ParentProcessName": parent, "SubjectUserName": account, "SubjectDomainName": DOMAIN,
                "SubjectAccount": f"{DOMAIN}\\{account}", "TokenElevationType": "%%1938"})
    return row


def firewall(when: datetime, source_ip: str, destination_ip: str, port: int, action: str, url: str = "",
             method: str = "", sent: int = 0, received: int = 0) -> dict:
    """One CEF traffic record of the perimeter firewall: ``action`` is allow or deny."""
    return {"TimeGenerated": timestamp(when), "DeviceVendor": "Palo Alto Networks", "DeviceProduct": "PAN-OS",
            "DeviceVersion": "11.1", "DeviceEventClassID": "end" if action == "allow" else "deny",
            "Activity": "TRAFFIC", "LogSeverity": "1" if action == "allow" else "3", "DeviceName": FIREWALL,
            "DeviceAction": action, "SimplifiedDeviceAction": "Allow" if action == "allow" else "Deny",
            "SourceIP": source_ip, "DestinationIP": destination_ip, "DestinationPort": port, "Protocol": "TCP",
            "ApplicationProtocol": "ssl" if port == 443 else "ssh" if port == 22 else "incomplete",
            "RequestURL": url, "RequestMethod": method, "SentBytes": sent, "ReceivedBytes": received,
            "CommunicationDirection": "Outbound" if source_ip.startswith("10.") else "Inbound",
            "Computer": "syslog-collector-01"}


def ordinary_day(world: World, rng: random.Random, day_start: datetime, volume: int, out: Rows) -> None:
    """Each Windows user's logon and a usual process, and the firewall allowing their usual traffic."""
    for _ in range(volume):
        for person in world.users:
            machine = world.machines[person.host]
            start = day_start + timedelta(hours=7 + rng.random() * 3)
            if machine.os == "Windows":
                out["SecurityEvent"].append(logon(machine, start, person.sam, 2))
                out["SecurityEvent"].append(process(machine, start + timedelta(minutes=rng.random() * 480),
                                                    person.sam, choice(rng, USUAL_PROCESSES),
                                                    "C:\\Windows\\explorer.exe"))
            url, ip = choice(rng, USUAL_DESTINATIONS)
            out["CommonSecurityLog"].append(firewall(start + timedelta(minutes=rng.random() * 480), machine.ip, ip,
                                                     443, "allow", f"https://{url}/", "GET", 2_000, 40_000))
