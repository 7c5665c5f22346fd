"""Incident changes: what a write action asks for, and the incident as Sentinel's REST API returns it.

The write side of the data layer (Microsoft Learn REST reference: Incidents - Create Or Update and
Incident Comments - Create Or Update, in Azure/azure-rest-api-specs specification/securityinsights).
A change is validated data: enums from Sentinel's API spec, one field group per kind, closing only
with a classification, its reason where Sentinel requires one, and a comment. ``apply_to`` turns it
into the properties of the full-replace PUT (Sentinel resends title, severity and status on every
update), so the ARM writer and the demo writer change an incident the same way.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, ClassVar, Protocol

from bot.sentinel.models import one_line
from bot.sentinel.params import InvalidParameter, Severity
from bot.sentinel.semantics import Declaration, Sem, declare

MAX_COMMENT_CHARS = 2000  # Sentinel allows more; a Teams-typed comment does not need it
MAX_CLASSIFICATION_COMMENT_CHARS = 1000
MAX_REASON_CHARS = 500  # what an escalation asks of the on-call analyst
_OBJECT_ID = re.compile(r"^[0-9a-fA-F-]{8,64}$")  # Entra object ids (test tenants use non-standard lengths)
_UPN = re.compile(r"^[^@\s\"'<>()\[\],;:\\]{1,64}@[A-Za-z0-9.-]{1,190}\.[A-Za-z]{2,63}$")


class ChangeKind(enum.Enum):
    ASSIGN = "assign"
    STATUS = "status"
    SEVERITY = "severity"
    COMMENT = "comment"
    ESCALATE = "escalate"  # tell the on-call analyst in Teams, comment on the incident, optionally assign


class IncidentStatus(enum.Enum):
    NEW = "New"
    ACTIVE = "Active"
    CLOSED = "Closed"


class Classification(enum.Enum):
    TRUE_POSITIVE = "TruePositive"
    BENIGN_POSITIVE = "BenignPositive"
    FALSE_POSITIVE = "FalsePositive"
    UNDETERMINED = "Undetermined"


class ClassificationReason(enum.Enum):
    SUSPICIOUS_ACTIVITY = "SuspiciousActivity"
    SUSPICIOUS_BUT_EXPECTED = "SuspiciousButExpected"
    INCORRECT_ALERT_LOGIC = "IncorrectAlertLogic"
    INACCURATE_DATA = "InaccurateData"


# The reasons the Sentinel portal offers per classification: one is the default, two are asked. Undetermined has none.
REASONS: dict[Classification, tuple[ClassificationReason, ...]] = {
    Classification.TRUE_POSITIVE: (ClassificationReason.SUSPICIOUS_ACTIVITY,),
    Classification.BENIGN_POSITIVE: (ClassificationReason.SUSPICIOUS_BUT_EXPECTED,),
    Classification.FALSE_POSITIVE: (ClassificationReason.INCORRECT_ALERT_LOGIC, ClassificationReason.INACCURATE_DATA),
    Classification.UNDETERMINED: (),
}


@dataclass(frozen=True)
class Owner:
    """An incident owner (Sentinel's IncidentOwnerInfo), or the Teams user asking for a change."""

    object_id: str | None = None
    user_principal_name: str | None = None
    name: str | None = None  # display name (Sentinel's assignedTo)
    email: str | None = None

    @property
    def label(self) -> str:
        return one_line(self.name or self.user_principal_name or self.email or self.object_id or "Unassigned", 120)

    @property
    def audit_label(self) -> str:
        """Who did it, as the audit comment names them: the sign-in name, else the object id."""
        return one_line(self.user_principal_name or self.email or self.object_id or self.name or "unknown user", 200)

    def to_api(self) -> dict[str, Any]:
        body: dict[str, Any] = {"ownerType": "User"}
        for key, value in (("objectId", self.object_id), ("userPrincipalName", self.user_principal_name),
                           ("email", self.email), ("assignedTo", self.name)):
            if value:
                body[key] = value
        return body

    @classmethod
    def from_api(cls, data: Any) -> Owner:
        data = data if isinstance(data, dict) else {}
        return cls(object_id=data.get("objectId") or None, user_principal_name=data.get("userPrincipalName") or None,
                   name=data.get("assignedTo") or None, email=data.get("email") or None)

    def to_dict(self) -> dict[str, Any]:
        return {"object_id": self.object_id, "user_principal_name": self.user_principal_name, "name": self.name,
                "email": self.email}

    @classmethod
    def from_dict(cls, data: Any) -> Owner:
        data = data if isinstance(data, dict) else {}
        return cls(**{k: (str(data[k]) if data.get(k) else None)
                      for k in ("object_id", "user_principal_name", "name", "email")})

    @property
    def assigned(self) -> bool:
        return bool(self.object_id or self.user_principal_name or self.email or self.name)


def owner_from_text(value: str) -> Owner:
    """A named user: a UPN (alice@contoso.com) or an Entra object id. Display names are refused, because
    Sentinel cannot resolve them and two people can share one."""
    text = (value or "").strip()
    if _UPN.fullmatch(text):
        return Owner(user_principal_name=text.lower())
    if _OBJECT_ID.fullmatch(text) and sum(c.isdigit() or c in "abcdefABCDEF" for c in text) >= 8:
        return Owner(object_id=text.lower())
    raise InvalidParameter("assignee", f"{one_line(text, 80)!r} is not a user principal name (name@domain) or an "
                                       "Entra object id. Use the person's sign-in name, e.g. alice@contoso.com.")


@dataclass(frozen=True)
class OnCallContact:
    """The analyst an escalation goes to, as the on-call roster named them when it was proposed."""

    person: Owner  # name, sign-in name (what Teams and Sentinel resolve), email
    phone: str | None = None
    team: str | None = None
    location: str | None = None
    shift_end: str | None = None  # ISO 8601, UTC

    def to_dict(self) -> dict[str, Any]:
        return {"person": self.person.to_dict(), "phone": self.phone, "team": self.team, "location": self.location,
                "shift_end": self.shift_end}

    @classmethod
    def from_dict(cls, data: Any) -> OnCallContact:
        data = data if isinstance(data, dict) else {}
        return cls(Owner.from_dict(data.get("person")),
                   **{k: (str(data[k]) if data.get(k) else None) for k in ("phone", "team", "location", "shift_end")})

    def details(self) -> dict[str, str]:
        """Display values for the cards and the View action (empty ones left out)."""
        shown = {"Name": self.person.name, "Sign-in name": self.person.user_principal_name,
                 "Email": self.person.email, "Phone": self.phone, "Team": self.team, "Location": self.location,
                 "On shift until": _utc_label(self.shift_end)}
        return {k: one_line(v, 200) for k, v in shown.items() if v}


def _utc_label(value: str | None) -> str | None:
    """An ISO 8601 time as "20 Nov 16:00 UTC"; anything else as it is."""
    try:
        moment = datetime.fromisoformat(value or "")
    except ValueError:
        return value
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%d %b %H:%M UTC")


def escalation_comment(on_call: OnCallContact, requester: Owner, reason: str | None, assigned: bool) -> str:
    """The incident comment an escalation adds: "Escalated to X by Y from Microsoft Teams", and what was asked."""
    person = on_call.person
    upn = person.user_principal_name
    who = person.label + (f" ({upn})" if upn and upn != person.label else "")
    text = f"Escalated to {who} by {requester.audit_label} from Microsoft Teams"
    if assigned:
        text += "; assigned to them"
    return text + (f"\n\nAsked: {reason}" if reason else "")


_IT = r" it| them| this| the incident| #?\d{1,9}| \[\d{1,4}\]"  # what a change verb names: "closed #900001 as"


@dataclass(frozen=True)
class ConfirmedChange:
    """A change a conversation confirmed and Sentinel accepted, with the incident as Sentinel returned it after: what
    an answer about it is held to ("I assigned #900002 to bob@contoso.com" to its owner, "closed as true positive" to
    its classification, "escalated to dana@contoso.com" to whom). Each value is read only after its cue words."""

    FACTS: ClassVar[Declaration] = declare(
        "change", ("changes", "incident changes"), identity=("incident", "kind", "at"), belongs=("incident",),
        incident=Sem.ID, kind=Sem.ACTION, at=Sem.TIMESTAMP, owner=Sem.ACCOUNT, status=Sem.STATUS,
        classification=Sem.STATUS, severity=Sem.SEVERITY, escalated_to=Sem.ACCOUNT, summary=Sem.TEXT,
        cues={"owner": rf"(?:re)?assigned(?:{_IT})? to|owner(?: is| now| set to)?|owned by|now owned by",
              "status": r"status(?: is| now| set to|:)?|moved(?: it)? to|set(?: it| the status)? to|"
                        r"marked(?: it)?(?: as)?",
              "classification": rf"(?:closed|classified|resolved)(?:{_IT})? as(?: a| an)?|"
                                r"classification(?: is| set to|:)?",
              "severity": r"severity(?: is| now| set to|:)?|(?:raised|lowered|set|changed|downgraded|upgraded|bumped)"
                          rf"(?:{_IT}| the severity| its severity)? to",
              "escalated_to": rf"escalated(?:{_IT})? to|paged|handed(?:{_IT})? (?:over )?to"},
        choices={"status": tuple(s.value for s in IncidentStatus),
                 "classification": tuple(c.value for c in Classification),
                 "severity": tuple(s.value for s in Severity)})

    incident: int
    kind: str  # a ChangeKind's value
    at: datetime
    summary: str
    owner: tuple[str, ...] = ()  # the owner after it: their sign-in name and their label
    status: str | None = None
    classification: str | None = None
    severity: str | None = None
    escalated_to: tuple[str, ...] = ()  # whom an escalation went to: their sign-in name and their label


@dataclass(frozen=True)
class IncidentChange:
    """One change to one incident. Build it with ``make_change`` (validated)."""

    kind: ChangeKind
    incident_number: int
    owner: Owner | None = None  # assign
    status: IncidentStatus | None = None  # status
    classification: Classification | None = None  # status Closed
    classification_reason: ClassificationReason | None = None
    classification_comment: str | None = None
    severity: Severity | None = None  # severity
    comment: str | None = None  # comment; escalate: what is asked of the on-call analyst
    on_call: OnCallContact | None = None  # escalate
    assign: bool = False  # escalate: also make the on-call analyst the owner

    def summary(self) -> str:
        """What changes, as the audit comment and the cards say it: "Status set to Closed (FalsePositive: pen test)"."""
        if self.kind is ChangeKind.ASSIGN:
            return f"Owner set to {self.owner.label if self.owner else 'Unassigned'}"
        if self.kind is ChangeKind.SEVERITY:
            return f"Severity set to {self.severity.value if self.severity else '?'}"
        if self.kind is ChangeKind.COMMENT:
            return "Comment added"
        if self.kind is ChangeKind.ESCALATE:
            who = self.on_call.person.label if self.on_call else "?"
            return f"Escalated to {who} (on call)" + (" and assigned to them" if self.assign else "")
        text = f"Status set to {self.status.value if self.status else '?'}"
        if self.classification:
            note = f": {one_line(self.classification_comment, 200)}" if self.classification_comment else ""
            text += f" ({self.classification.value}{note})"
        return text

    def target_fields(self) -> dict[str, str]:
        """The incident fields this change sets, as display values (the "after" of before -> after)."""
        if self.kind is ChangeKind.ASSIGN:
            return {"Owner": self.owner.label if self.owner else "Unassigned"}
        if self.kind is ChangeKind.SEVERITY:
            return {"Severity": self.severity.value if self.severity else ""}
        if self.kind is ChangeKind.COMMENT:
            return {"Comment": one_line(self.comment, 300)}
        if self.kind is ChangeKind.ESCALATE:
            who = self.on_call.person.label if self.on_call else ""
            return {"Escalated to": who} | ({"Owner": who} if self.assign else {})
        # Reopening clears the classification (as the portal does), so the card shows that too.
        return {"Status": self.status.value if self.status else "",
                "Classification": self.classification.value if self.classification else "",
                "Reason": self.classification_reason.value if self.classification_reason else "",
                "Closing comment": one_line(self.classification_comment, 300)}

    def parameters(self) -> dict[str, Any]:
        """The action's parameters as plain data (the cards' "View action" and the model's tool result)."""
        out: dict[str, Any] = {"action": self.kind.value, "incident": self.incident_number}
        if self.owner is not None:
            out["owner"] = {k: v for k, v in self.owner.to_dict().items() if v}
        for key, value in (("status", self.status), ("classification", self.classification),
                           ("classification_reason", self.classification_reason), ("severity", self.severity)):
            if value is not None:
                out[key] = value.value
        if self.classification_comment:
            out["classification_comment"] = self.classification_comment
        if self.on_call is not None:
            out["on_call"] = {k: v for k, v in {**self.on_call.person.to_dict(), "phone": self.on_call.phone,
                                                "team": self.on_call.team, "location": self.on_call.location,
                                                "shift_end": self.on_call.shift_end}.items() if v}
        if self.kind is ChangeKind.ESCALATE:
            out["assign"] = self.assign
        if self.comment:
            out["reason" if self.kind is ChangeKind.ESCALATE else "comment"] = self.comment
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "incident_number": self.incident_number,
                "owner": self.owner.to_dict() if self.owner else None,
                "status": _value(self.status), "classification": _value(self.classification),
                "classification_reason": _value(self.classification_reason),
                "classification_comment": self.classification_comment, "severity": _value(self.severity),
                "comment": self.comment, "on_call": self.on_call.to_dict() if self.on_call else None,
                "assign": self.assign}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> IncidentChange:
        """Rebuilt from state and validated again (state is storage, not trusted input)."""
        owner = data.get("owner")
        return make_change(ChangeKind(data["kind"]), int(data["incident_number"]),
                           owner=Owner.from_dict(owner) if owner else None, status=data.get("status"),
                           classification=data.get("classification"),
                           classification_reason=data.get("classification_reason"),
                           classification_comment=data.get("classification_comment"),
                           severity=data.get("severity"), comment=data.get("comment"),
                           on_call=OnCallContact.from_dict(data["on_call"]) if data.get("on_call") else None,
                           assign=bool(data.get("assign")))

    def is_noop_for(self, incident: IncidentSnapshot) -> bool:
        """True when the incident already is what this change would make it (nothing to write)."""
        if self.kind is ChangeKind.ASSIGN and self.owner is not None:
            mine = {v.lower() for v in (self.owner.object_id, self.owner.user_principal_name) if v}
            theirs = {v.lower() for v in (incident.owner.object_id, incident.owner.user_principal_name,
                                          incident.owner.email) if v}
            return bool(mine & theirs)
        if self.kind is ChangeKind.SEVERITY:
            return incident.severity == (self.severity.value if self.severity else None)
        if self.kind is ChangeKind.STATUS and self.status is not IncidentStatus.CLOSED:
            return incident.status == (self.status.value if self.status else None)
        return False

    def apply_to(self, properties: dict[str, Any]) -> dict[str, Any]:
        """The incident's writable properties with this change made (for the full-replace PUT).

        Read-only properties are dropped; a comment changes no property (it is a separate resource).
        Reopening a closed incident clears its classification, as the portal does.
        """
        out = {k: v for k, v in properties.items() if k not in READ_ONLY_PROPERTIES}
        if self.kind is ChangeKind.ASSIGN and self.owner is not None:
            out["owner"] = self.owner.to_api()
        elif self.kind is ChangeKind.ESCALATE and self.assign and self.on_call is not None:
            out["owner"] = self.on_call.person.to_api()
        elif self.kind is ChangeKind.SEVERITY and self.severity is not None:
            out["severity"] = self.severity.value
        elif self.kind is ChangeKind.STATUS and self.status is not None:
            out["status"] = self.status.value
            if self.status is IncidentStatus.CLOSED:
                out["classification"] = self.classification.value if self.classification else None
                out["classificationReason"] = (self.classification_reason.value if self.classification_reason
                                               else None)
                out["classificationComment"] = self.classification_comment
                out = {k: v for k, v in out.items() if v is not None}
            else:
                for key in ("classification", "classificationReason", "classificationComment"):
                    out.pop(key, None)
        return out


# Properties the API computes; sending them back is pointless (Incidents.json marks them readOnly).
READ_ONLY_PROPERTIES = frozenset({
    "incidentNumber", "incidentUrl", "createdTimeUtc", "lastModifiedTimeUtc", "additionalData",
    "relatedAnalyticRuleIds", "providerName", "providerIncidentId", "teamInformation",
})


def make_change(kind: ChangeKind, incident_number: int, *, owner: Owner | None = None, status: Any = None,
                classification: Any = None, classification_reason: Any = None,
                classification_comment: Any = None, severity: Any = None, comment: Any = None,
                on_call: OnCallContact | None = None, assign: bool = False) -> IncidentChange:
    """A validated change; a bad value raises InvalidParameter saying what is allowed."""
    if not isinstance(incident_number, int) or isinstance(incident_number, bool) or not 0 < incident_number < 10**10:
        raise InvalidParameter("incident", "must be an incident number, e.g. 42")
    if kind is ChangeKind.ASSIGN:
        if owner is None or not (owner.object_id or owner.user_principal_name):
            raise InvalidParameter("assignee", "say who: \"me\", a sign-in name (alice@contoso.com) or an object id")
        return IncidentChange(kind, incident_number, owner=owner)
    if kind is ChangeKind.SEVERITY:
        return IncidentChange(kind, incident_number, severity=_enum(Severity, severity, "severity"))
    if kind is ChangeKind.COMMENT:
        text = _text(comment, "comment", MAX_COMMENT_CHARS)
        if not text:
            raise InvalidParameter("comment", "the comment is empty; say what to write")
        return IncidentChange(kind, incident_number, comment=text)
    if kind is ChangeKind.ESCALATE:
        if on_call is None or not on_call.person.user_principal_name:
            raise InvalidParameter("on_call", "nobody with a sign-in name is on call to escalate to")
        return IncidentChange(kind, incident_number, on_call=on_call, assign=bool(assign),
                              comment=_text(comment, "reason", MAX_REASON_CHARS) or None)
    new_status = _enum(IncidentStatus, status, "status")
    if new_status is not IncidentStatus.CLOSED:
        return IncidentChange(kind, incident_number, status=new_status)
    if classification in (None, ""):
        raise InvalidParameter("classification", "closing needs a classification: TruePositive, BenignPositive, "
                                                 "FalsePositive or Undetermined")
    chosen = _enum(Classification, classification, "classification")
    allowed = REASONS[chosen]
    reason = None
    if allowed:
        if classification_reason in (None, "") and len(allowed) > 1:  # asked, never guessed
            raise InvalidParameter("classification_reason", f"{chosen.value} takes "
                                   + " or ".join(r.value for r in allowed) + ": ask the analyst which")
        reason = _enum(ClassificationReason, classification_reason, "classification_reason") \
            if classification_reason not in (None, "") else allowed[0]
        if reason not in allowed:
            raise InvalidParameter("classification_reason", f"{chosen.value} takes "
                                   + " or ".join(r.value for r in allowed))
    note = _text(classification_comment, "classification_comment", MAX_CLASSIFICATION_COMMENT_CHARS)
    if not note:
        raise InvalidParameter("classification_comment", "closing needs a short comment saying why, e.g. "
                                                         "\"close 42 true positive: confirmed with the user\"")
    return IncidentChange(kind, incident_number, status=new_status, classification=chosen,
                          classification_reason=reason, classification_comment=note)


@dataclass(frozen=True)
class IncidentSnapshot:
    """An incident as Sentinel's REST API returned it: its resource name (GUID), etag and properties."""

    name: str  # the resource name (SecurityIncident.IncidentName), used in the API paths
    etag: str
    number: int
    title: str
    severity: str
    status: str
    owner: Owner = field(default_factory=Owner)
    classification: str | None = None
    classification_reason: str | None = None
    classification_comment: str | None = None
    url: str | None = None
    last_modified: str | None = None
    properties: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)  # as returned

    def fields(self) -> dict[str, str]:
        """Display values of the fields changes touch (the "before" of before -> after)."""
        return {"Owner": self.owner.label if self.owner.assigned else "Unassigned", "Severity": self.severity,
                "Status": self.status, "Classification": self.classification or "",
                "Reason": self.classification_reason or "",
                "Closing comment": one_line(self.classification_comment, 300)}

    @classmethod
    def from_api(cls, resource: dict[str, Any]) -> IncidentSnapshot:
        """From an ARM incident resource ({name, etag, properties: {...}})."""
        raw_props = resource.get("properties")
        props: dict[str, Any] = raw_props if isinstance(raw_props, dict) else {}
        return cls(name=str(resource.get("name") or ""), etag=str(resource.get("etag") or ""),
                   number=int(props.get("incidentNumber") or 0), title=str(props.get("title") or ""),
                   severity=str(props.get("severity") or ""), status=str(props.get("status") or ""),
                   owner=Owner.from_api(props.get("owner")), classification=props.get("classification") or None,
                   classification_reason=props.get("classificationReason") or None,
                   classification_comment=props.get("classificationComment") or None,
                   url=props.get("incidentUrl") or None, last_modified=props.get("lastModifiedTimeUtc") or None,
                   properties=dict(props))

    def to_dict(self) -> dict[str, Any]:
        """For state and the cards: everything but the raw properties (re-read before every write)."""
        return {"name": self.name, "etag": self.etag, "number": self.number, "title": self.title,
                "severity": self.severity, "status": self.status, "owner": self.owner.to_dict(),
                "classification": self.classification, "classification_reason": self.classification_reason,
                "classification_comment": self.classification_comment, "url": self.url,
                "last_modified": self.last_modified}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> IncidentSnapshot:
        return cls(name=str(data["name"]), etag=str(data["etag"]), number=int(data["number"]),
                   title=str(data.get("title") or ""), severity=str(data.get("severity") or ""),
                   status=str(data.get("status") or ""), owner=Owner.from_dict(data.get("owner")),
                   classification=data.get("classification"), classification_reason=data.get("classification_reason"),
                   classification_comment=data.get("classification_comment"), url=data.get("url"),
                   last_modified=data.get("last_modified"))

    def with_changes(self, **changes: Any) -> IncidentSnapshot:
        return replace(self, **changes)


class WriteError(Exception):
    """A write that did not happen (or may not have). ``message`` is safe to show and says what to do.

    kind: conflict (the incident changed: re-read and confirm again), forbidden (role missing),
    not_found, bad_request (Sentinel refused the values), unauthorized, throttled, timeout, unavailable
    (5xx, network), not_configured.
    """

    def __init__(self, kind: str, message: str, *, status: int | None = None, detail: str = "",
                 retry_possible: bool = False) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status
        self.detail = detail  # service text for logs; not for users
        self.retry_possible = retry_possible


REQUIRED_PROPERTIES = ("title", "severity", "status")  # Sentinel's update is a full replace: these are resent


def check_updatable(incident: IncidentSnapshot, change: IncidentChange) -> None:
    """Refuse, before any write, an update that could not be safe: a comment is not an update, and without
    the etag the write would overwrite blindly, without the properties it would erase them."""
    if change.kind is ChangeKind.COMMENT:
        raise WriteError("bad_request", "A comment is not an incident update; the bot should have added it "
                         "as a comment. Please report this.", detail="update() called with a comment change")
    if not incident.etag or any(key not in incident.properties for key in REQUIRED_PROPERTIES):
        raise WriteError("conflict", "The incident has to be looked at again before it can be changed. "
                         "Open it again and confirm the change once more.",
                         detail="update() needs a snapshot from read(), with its etag and properties")


@dataclass(frozen=True)
class WriteRequest:
    """A write as Sentinel's REST API takes it: method, path under the workspace's Microsoft.SecurityInsights
    provider, and body. The ARM writer sends exactly this; the outcome card's "View action" shows it."""

    method: str
    path: str
    body: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "path": self.path, "body": self.body}


def update_request(incident: IncidentSnapshot, change: IncidentChange) -> WriteRequest:
    """The full-replace PUT of ``incident`` with ``change`` made, guarded by its etag."""
    check_updatable(incident, change)
    return WriteRequest("PUT", f"incidents/{incident.name}",
                        {"etag": incident.etag, "properties": change.apply_to(incident.properties)})


def comment_request(incident_name: str, comment_id: str, message: str) -> WriteRequest:
    """The PUT of a comment under an id the caller chose (a retry rewrites the same comment)."""
    return WriteRequest("PUT", f"incidents/{incident_name}/comments/{comment_id}", {"properties": {"message": message}})


class IncidentWriter(Protocol):
    """Reads an incident for writing and writes it: Sentinel's REST API, or the demo workspace."""

    is_demo: bool

    async def read(self, incident_name: str) -> IncidentSnapshot:
        """The incident now, with its etag. Raises WriteError."""

    async def update(self, incident: IncidentSnapshot, change: IncidentChange) -> IncidentSnapshot:
        """Write ``change`` onto ``incident`` with its etag; the incident after. Raises WriteError (conflict
        when the etag is stale). Not for comments (``add_comment``)."""

    async def add_comment(self, incident_name: str, comment_id: str, message: str) -> None:
        """Add a comment with a client-chosen id (a retry with the same id does not duplicate it)."""

    async def close(self) -> None:
        ...


def _enum(kind: type[enum.Enum], value: Any, name: str) -> Any:
    if isinstance(value, kind):
        return value
    text = str(value or "").strip().replace(" ", "").replace("_", "").lower()
    for member in kind:
        if text == str(member.value).lower():
            return member
    allowed = ", ".join(str(m.value) for m in kind)
    raise InvalidParameter(name, f"{one_line(value, 40)!r} is not one of: {allowed}")


def _text(value: Any, name: str, limit: int) -> str:
    text = "" if value is None else str(value).strip()
    if len(text) > limit:
        raise InvalidParameter(name, f"is {len(text)} characters; keep it under {limit}")
    return "".join(ch if ch.isprintable() or ch in "\n\t" else " " for ch in text)


def _value(member: enum.Enum | None) -> Any:
    return member.value if member is not None else None
