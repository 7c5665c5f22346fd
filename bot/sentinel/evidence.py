"""The typed records of the evidence queries (``bot.sentinel.queries.evidence``): one per kind of row an
investigation reads. Each says which entity values it holds (``identifiers``: the fact check lets an answer cite
them) and, for the card and the model's compact text, its few telling cells under its kind's ``HEADERS``.
Times are aware UTC datetimes; text is as the logs hold it (attacker-writable: shown through ``one_line``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from bot.sentinel.semantics import Declaration, Sem, declare

MFA_DENIED = "500121"  # Entra sign-in error: strong authentication failed (the user denied or ignored the push)
SIGNIN_SUCCESS = "0"


def _at(moment: datetime | None) -> str:
    return f"{moment:%Y-%m-%d %H:%M}" if moment else "-"


def _ids(*pairs: tuple[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple((kind, value) for kind, value in dict.fromkeys(pairs) if value)


@dataclass(frozen=True)
class SigninGroup:
    """Sign-ins of one account with one result, from one IP, country and app, with their count and first/last."""

    FACTS: ClassVar[Declaration] = declare(
        "sign-in", ("sign-ins", "sign-in", "signins", "logins", "log-ins", "sign-in attempts", "attempts"),
        identity=("upn", "result_type", "ip", "country", "app"), belongs=("upn", "ip"), counted_by="count",
        upn=Sem.ACCOUNT, result_type=Sem.RESULT, ip=Sem.IP, country=Sem.COUNTRY, app=Sem.APP, risk_level=Sem.LEVEL,
        count=Sem.COUNT, first=Sem.TIMESTAMP, last=Sem.TIMESTAMP, cues={"risk_level": r"risk"})
    HEADERS: ClassVar[tuple[str, ...]] = ("account", "result", "ip", "country", "app", "risk", "count", "last")
    upn: str
    result_type: str
    result_description: str
    ip: str
    country: str
    app: str
    risk_level: str
    count: int
    first: datetime | None
    last: datetime | None
    known_country: bool = False  # the account signed in successfully from this country in the baseline before

    @property
    def succeeded(self) -> bool:
        return self.result_type == SIGNIN_SUCCESS

    @property
    def mfa_denied(self) -> bool:
        return self.result_type == MFA_DENIED

    def identifiers(self) -> tuple[tuple[str, str], ...]:
        return _ids(("account", self.upn), ("ip", self.ip))

    def cells(self) -> tuple[str, ...]:
        result = "success" if self.succeeded else f"{self.result_type} {self.result_description}".strip()
        return (self.upn, result, self.ip, self.country, self.app, self.risk_level, str(self.count), _at(self.last))


@dataclass(frozen=True)
class DirectoryChange:
    """An AuditLogs record the account made (``by_entity``) or was the target of."""

    FACTS: ClassVar[Declaration] = declare(
        "directory change", ("directory changes", "audit events", "directory operations", "role changes"),
        identity=("time", "operation"), belongs=("initiator", "targets"),
        time=Sem.TIMESTAMP, operation=Sem.ACTION, result=Sem.RESULT, initiator=Sem.ACCOUNT, targets=Sem.ACCOUNT,
        role=Sem.TEXT)
    HEADERS: ClassVar[tuple[str, ...]] = ("time", "operation", "result", "by", "targets", "role")
    time: datetime | None
    operation: str
    result: str
    initiator: str
    targets: tuple[str, ...]
    role: str  # the role added or removed, for role operations
    by_entity: bool

    def identifiers(self) -> tuple[tuple[str, str], ...]:
        return _ids(("account", self.initiator), *(("account", t) for t in self.targets))

    def cells(self) -> tuple[str, ...]:
        return (_at(self.time), self.operation, self.result, self.initiator, ", ".join(self.targets), self.role)


@dataclass(frozen=True)
class RiskyUser:
    FACTS: ClassVar[Declaration] = declare(
        "risky user", ("risky user records",), identity=("upn",), belongs=("upn",),
        upn=Sem.ACCOUNT, risk_level=Sem.LEVEL, risk_state=Sem.STATUS, risk_detail=Sem.TEXT, updated=Sem.TIMESTAMP,
        cues={"risk_level": r"risk", "risk_state": r"risk state"})
    HEADERS: ClassVar[tuple[str, ...]] = ("account", "risk level", "risk state", "detail", "updated")
    upn: str
    risk_level: str
    risk_state: str
    risk_detail: str
    updated: datetime | None

    def identifiers(self) -> tuple[tuple[str, str], ...]:
        return _ids(("account", self.upn))

    def cells(self) -> tuple[str, ...]:
        return (self.upn, self.risk_level, self.risk_state, self.risk_detail, _at(self.updated))


@dataclass(frozen=True)
class RiskDetection:
    FACTS: ClassVar[Declaration] = declare(
        "risk detection", ("risk detections", "risk events", "detections"), identity=("time", "event_type"),
        belongs=("upn", "ip"), time=Sem.TIMESTAMP, upn=Sem.ACCOUNT, event_type=Sem.ACTION, risk_level=Sem.LEVEL,
        risk_state=Sem.STATUS, ip=Sem.IP, country=Sem.COUNTRY,
        cues={"risk_level": r"risk", "risk_state": r"risk state"})
    HEADERS: ClassVar[tuple[str, ...]] = ("time", "account", "detection", "level", "state", "ip", "country")
    time: datetime | None
    upn: str
    event_type: str
    risk_level: str
    risk_state: str
    ip: str
    country: str

    def identifiers(self) -> tuple[tuple[str, str], ...]:
        return _ids(("account", self.upn), ("ip", self.ip))

    def cells(self) -> tuple[str, ...]:
        return (_at(self.time), self.upn, self.event_type, self.risk_level, self.risk_state, self.ip, self.country)


@dataclass(frozen=True)
class BehaviorEvent:
    FACTS: ClassVar[Declaration] = declare(
        "behavior event", ("behavior events", "behaviour events", "UEBA events", "UEBA activities"),
        identity=("time", "activity_type"), belongs=("upn", "source_ip"), time=Sem.TIMESTAMP, upn=Sem.ACCOUNT,
        activity_type=Sem.ACTION, action_type=Sem.ACTION, priority=Sem.SCORE, source_ip=Sem.IP, location=Sem.COUNTRY,
        cues={"priority": r"priority"})
    HEADERS: ClassVar[tuple[str, ...]] = ("time", "account", "activity", "action", "priority", "ip", "location")
    time: datetime | None
    upn: str
    activity_type: str
    action_type: str
    priority: int
    source_ip: str
    location: str

    def identifiers(self) -> tuple[tuple[str, str], ...]:
        return _ids(("account", self.upn), ("ip", self.source_ip))

    def cells(self) -> tuple[str, ...]:
        return (_at(self.time), self.upn, self.activity_type, self.action_type, str(self.priority), self.source_ip,
                self.location)


@dataclass(frozen=True)
class ProcessEvent:
    FACTS: ClassVar[Declaration] = declare(
        "process", ("process events", "process launches", "process executions", "processes"),
        identity=("time", "device", "file_name"), belongs=("device", "account", "file_name", "parent", "sha256"),
        time=Sem.TIMESTAMP, device=Sem.HOST, account=Sem.ACCOUNT, file_name=Sem.PROCESS, command_line=Sem.COMMAND,
        parent=Sem.PARENT, sha256=Sem.HASH)
    HEADERS: ClassVar[tuple[str, ...]] = ("time", "device", "account", "process", "command line", "parent")
    time: datetime | None
    device: str
    account: str
    file_name: str
    command_line: str
    parent: str
    sha256: str

    def identifiers(self) -> tuple[tuple[str, str], ...]:
        return _ids(("host", self.device), ("account", self.account), ("file", self.file_name),
                    ("filehash", self.sha256), ("file", self.parent))

    def cells(self) -> tuple[str, ...]:
        return (_at(self.time), self.device, self.account, self.file_name, self.command_line, self.parent)


@dataclass(frozen=True)
class LogonEvent:
    FACTS: ClassVar[Declaration] = declare(
        "logon", ("logons", "logon events", "logon attempts", "device logons"), identity=("time", "device", "account"),
        belongs=("device", "account", "remote_ip"), time=Sem.TIMESTAMP, device=Sem.HOST, account=Sem.ACCOUNT,
        action=Sem.RESULT, logon_type=Sem.ACTION, remote_ip=Sem.IP, failure=Sem.ERROR)
    HEADERS: ClassVar[tuple[str, ...]] = ("time", "device", "account", "action", "logon type", "remote ip", "failure")
    time: datetime | None
    device: str
    account: str
    action: str
    logon_type: str
    remote_ip: str
    failure: str

    def identifiers(self) -> tuple[tuple[str, str], ...]:
        return _ids(("host", self.device), ("account", self.account), ("ip", self.remote_ip))

    def cells(self) -> tuple[str, ...]:
        return (_at(self.time), self.device, self.account, self.action, self.logon_type, self.remote_ip, self.failure)


@dataclass(frozen=True)
class NetworkEvent:
    FACTS: ClassVar[Declaration] = declare(
        "connection", ("connections", "network connections", "network events", "outbound connections"),
        identity=("time", "device", "remote_ip", "remote_port"),
        belongs=("device", "remote_ip", "remote_url", "process"),
        time=Sem.TIMESTAMP, device=Sem.HOST, action=Sem.RESULT, remote_ip=Sem.IP, remote_port=Sem.PORT,
        remote_url=Sem.DOMAIN, process=Sem.PROCESS, cues={"remote_port": r"port"})
    HEADERS: ClassVar[tuple[str, ...]] = ("time", "device", "action", "remote ip", "port", "remote url", "process")
    time: datetime | None
    device: str
    action: str
    remote_ip: str
    remote_port: int
    remote_url: str
    process: str

    def identifiers(self) -> tuple[tuple[str, str], ...]:
        return _ids(("host", self.device), ("ip", self.remote_ip), ("url", self.remote_url), ("file", self.process))

    def cells(self) -> tuple[str, ...]:
        return (_at(self.time), self.device, self.action, self.remote_ip, str(self.remote_port), self.remote_url,
                self.process)


@dataclass(frozen=True)
class FileEvent:
    FACTS: ClassVar[Declaration] = declare(
        "file event", ("file events", "file creations", "files written", "file operations"),
        identity=("time", "device", "file_name"), belongs=("device", "file_name", "sha256", "process"),
        time=Sem.TIMESTAMP, device=Sem.HOST, action=Sem.ACTION, file_name=Sem.FILE, folder=Sem.PATH, sha256=Sem.HASH,
        process=Sem.PARENT)
    HEADERS: ClassVar[tuple[str, ...]] = ("time", "device", "action", "file", "folder", "sha256", "process")
    time: datetime | None
    device: str
    action: str
    file_name: str
    folder: str
    sha256: str
    process: str

    def identifiers(self) -> tuple[tuple[str, str], ...]:
        return _ids(("host", self.device), ("file", self.file_name), ("filehash", self.sha256), ("file", self.process))

    def cells(self) -> tuple[str, ...]:
        return (_at(self.time), self.device, self.action, self.file_name, self.folder, self.sha256, self.process)


@dataclass(frozen=True)
class EmailMessage:
    FACTS: ClassVar[Declaration] = declare(
        "email", ("emails", "e-mails", "messages", "mails"), identity=("message_id", "recipient"),
        belongs=("sender", "recipient", "message_id"), time=Sem.TIMESTAMP, message_id=Sem.ID, sender=Sem.SENDER,
        recipient=Sem.RECIPIENT, subject=Sem.TEXT, delivery_action=Sem.ACTION, delivery_location=Sem.ACTION,
        threat_types=Sem.TEXT)
    HEADERS: ClassVar[tuple[str, ...]] = ("time", "from", "to", "subject", "delivery", "location", "threats")
    time: datetime | None
    message_id: str
    sender: str
    recipient: str
    subject: str
    delivery_action: str
    delivery_location: str
    threat_types: str

    def identifiers(self) -> tuple[tuple[str, str], ...]:
        return _ids(("account", self.sender), ("account", self.recipient), ("message", self.message_id))

    def cells(self) -> tuple[str, ...]:
        return (_at(self.time), self.sender, self.recipient, self.subject, self.delivery_action,
                self.delivery_location, self.threat_types)


@dataclass(frozen=True)
class UrlClick:
    FACTS: ClassVar[Declaration] = declare(
        "url click", ("clicks", "URL clicks", "link clicks", "url clicks"), identity=("time", "upn", "url"),
        belongs=("upn", "url", "message_id"), time=Sem.TIMESTAMP, upn=Sem.ACCOUNT, url=Sem.URL, action=Sem.ACTION,
        clicked_through=Sem.FLAG, threat_types=Sem.TEXT, message_id=Sem.ID,
        cues={"clicked_through": r"clicked(?: through| on| the| it)?|opened the link|followed the link"})
    HEADERS: ClassVar[tuple[str, ...]] = ("time", "account", "url", "action", "clicked through", "threats")
    time: datetime | None
    upn: str
    url: str
    action: str
    clicked_through: bool
    threat_types: str
    message_id: str

    def identifiers(self) -> tuple[tuple[str, str], ...]:
        return _ids(("account", self.upn), ("url", self.url), ("message", self.message_id))

    def cells(self) -> tuple[str, ...]:
        return (_at(self.time), self.upn, self.url, self.action, "yes" if self.clicked_through else "no",
                self.threat_types)


@dataclass(frozen=True)
class Indicator:
    """A threat-intelligence indicator whose observable is the entity (ThreatIntelIndicators, latest of each)."""

    FACTS: ClassVar[Declaration] = declare(
        "indicator", ("indicators", "TI indicators", "threat-intelligence indicators", "threat intel matches"),
        identity=("indicator_id",), belongs=("value",), indicator_id=Sem.ID, key=Sem.TEXT, value=Sem.ID,
        confidence=Sem.SCORE, valid_from=Sem.TIMESTAMP, valid_until=Sem.TIMESTAMP, valid=Sem.FLAG, tags=Sem.TEXT,
        cues={"confidence": r"confidence(?: of| score)?",
              "valid": r"(?:is|still|currently) (?:a )?valid(?: indicator)?|active indicator"})
    HEADERS: ClassVar[tuple[str, ...]] = ("observable", "value", "confidence", "valid from", "valid until", "valid now",
                                          "tags")
    indicator_id: str
    key: str
    value: str
    confidence: int
    valid_from: datetime | None
    valid_until: datetime | None
    valid: bool  # now, by the service's clock: active, not revoked, inside its validity
    tags: str

    def identifiers(self) -> tuple[tuple[str, str], ...]:
        return _ids((_ID_KIND.get(self.key.split(":")[0], "indicator"), self.value))

    def cells(self) -> tuple[str, ...]:
        return (self.key, self.value, str(self.confidence), _at(self.valid_from), _at(self.valid_until),
                "yes" if self.valid else "no", self.tags)


_ID_KIND = {"ipv4-addr": "ip", "ipv6-addr": "ip", "url": "url", "domain-name": "dns", "file": "filehash",
            "email-addr": "account"}


@dataclass(frozen=True)
class AlertIncident:
    """An alert's incident and how it stands (SecurityIncident's latest row naming the alert in its AlertIds)."""

    FACTS: ClassVar[Declaration] = declare(
        "alert incident", ("alert incidents",), identity=("alert_id",), belongs=("alert_id", "incident"),
        alert_id=Sem.ID, incident=Sem.ID, status=Sem.STATUS, classification=Sem.STATUS)
    HEADERS: ClassVar[tuple[str, ...]] = ("alert", "incident", "status", "classification")
    alert_id: str
    incident: int
    status: str
    classification: str

    @property
    def closed_benign(self) -> bool:
        """Closed as false positive or benign positive: an analyst judged the detection not an attack."""
        return self.status.lower() == "closed" and self.classification.lower() in ("falsepositive", "benignpositive")

    def identifiers(self) -> tuple[tuple[str, str], ...]:
        return ()

    def cells(self) -> tuple[str, ...]:
        return (self.alert_id, f"#{self.incident}", self.status, self.classification or "-")
