"""The Entities column of SecurityAlert, read whole: every entity Microsoft documents, with all its identifiers.

Sentinel and the Defender products write ``Entities`` as a JSON array of objects, each with a ``Type`` and an
``$id``; an object refers to another one by ``{"$ref": "<id>"}``, and an entity first met inside another one (a
process's image file, that file's hashes, a parent process, a host's logged-on users) is defined there, inline,
and listed at the top level only as a reference. Sources: Microsoft Learn "Microsoft Sentinel entity types
reference" (learn.microsoft.com/azure/sentinel/entities-reference: the types, their identifiers and the entity
schemas), the msticpy entity model (microsoft/msticpy, msticpy/datamodel/entities) and real alert samples
(tests/data/README.md).

Two readings, one set of rules:

- ``alert_sightings`` (and ``alert_entity_values``, its (type, value) pairs): the entities the queries count and
  pivot on. The entities are the top-level items (the first ``MV_EXPAND_LIMIT``, as Log Analytics' mv-expand) and
  the entities defined inline at the ``NESTED_PATHS`` under each; each is identified by ``ENTITY_VALUE_RULES``.
  ``kql.expand_entities`` builds the same walk and the same rules in KQL, so the demo (which computes these in
  Python at load) and the live workspace agree by construction. ``IdentityMap`` then ties an account's or host's
  spellings into one identity, as ``kql.identity_tables`` and ``kql.resolve_identities`` do.
- ``decode_entities``: the whole model for one alert, for cards, the model and ``investigate``: each entity with
  its canonical value, every identifier it carries, and its links (``$ref`` resolved inside the alert) to the
  entities it names (process -> image file, parent process, account, host). Nothing here raises: text that is not
  JSON, a ``$ref`` to a missing ``$id``, cyclic references, unknown types and thousands of entities are decoded as
  far as they go (``EntityList.unreadable``, ``Entity.type`` "unknown").

Accounts are identified by their ``UserPrincipalName`` first; an address is composed from ``Name`` and
``UPNSuffix`` only when the name is a sign-in name (no space: Sentinel sometimes writes the display name there),
so no address is shown that exists nowhere.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

# Log Analytics' mv-expand default; the demo applies the same cap so both backends agree.
MV_EXPAND_LIMIT = 128
MAX_DECODED_ENTITIES = 2000  # one alert's entities decoded for display; the rest are counted, not kept
MAX_IDENTIFIER_CHARS = 1000  # one identifier's text, cut (command lines can be long)

# How an entity of each type is identified: alternatives tried in order, each (fields that must all be non-empty,
# separator to join them with, fields that must hold no space). A field joined before a separator must not already
# hold it: Sentinel may write a whole UPN in an account's Name beside its UPNSuffix (tests/data/README.md), and
# "user@contoso.com@contoso.com" exists nowhere (a registry key's Key, joined last, holds backslashes). Microsoft
# Learn's entity types reference gives the identifiers per type; the first alternative is the strongest one an
# analyst searches by.
Rule = tuple[tuple[str, ...], str, tuple[str, ...]]
ENTITY_VALUE_RULES: dict[str, tuple[Rule, ...]] = {
    "account": ((("UserPrincipalName",), "", ()), (("Name", "UPNSuffix"), "@", ("Name",)),
                (("NTDomain", "Name"), "\\", ("Name",)), (("Name",), "", ("Name",)), (("AadUserId",), "", ()),
                (("Sid",), "", ()), (("ObjectGuid",), "", ()), (("PUID",), "", ())),
    "host": ((("HostName",), "", ()), (("NetBiosName",), "", ()), (("FQDN",), "", ()), (("AadDeviceId",), "", ()),
             (("MdatpDeviceId",), "", ()), (("MachineId",), "", ()), (("AzureID",), "", ()),
             (("OMSAgentID",), "", ())),
    "ip": ((("Address",), "", ()),),
    "url": ((("Url",), "", ()),),
    "file": ((("Name",), "", ()),),
    "filehash": ((("Value",), "", ()),),
    "process": ((("CommandLine",), "", ()),),
    "mailbox": ((("MailboxPrimaryAddress",), "", ()), (("Upn",), "", ())),
    "mailMessage": ((("NetworkMessageId",), "", ()), (("InternetMessageId",), "", ())),
    "mailCluster": ((("Query",), "", ()),),
    "dns": ((("DomainName",), "", ()),),
    "cloud-application": ((("Name",), "", ()), (("AppId",), "", ())),
    "oauth-application": ((("Name",), "", ()), (("OAuthAppId",), "", ())),
    "cloud-logon-session": ((("SessionId",), "", ()),),
    "azure-resource": ((("ResourceId",), "", ()),),
    "registry-key": ((("Hive", "Key"), "\\", ()),),
    "registry-value": ((("Name",), "", ()),),
    "malware": ((("Name",), "", ()),),
    "security-group": ((("DistinguishedName",), "", ()), (("SID",), "", ()), (("ObjectGuid",), "", ())),
    "iotdevice": ((("DeviceId",), "", ()), (("DeviceName",), "", ())),
}

# entity_value reads a field's text once: the fields that must hold no space are among the fields joined.
assert all(set(spaceless) <= set(fields) for rules in ENTITY_VALUE_RULES.values() for fields, _, spaceless in rules)

# Values that identify nothing: a host's loopback and unspecified addresses (Defender lists every interface of a
# device, 127.0.0.1 and ::1 included), which would otherwise top every count. Compared as written (KQL's ==).
UNIDENTIFYING: dict[str, frozenset[str]] = {"ip": frozenset({"127.0.0.1", "::1", "0.0.0.0", "::"})}

# Every identifier shown per type (the value's fields first), from the entity schemas on Microsoft Learn.
IDENTIFIER_FIELDS: dict[str, tuple[str, ...]] = {
    "account": ("UserPrincipalName", "Name", "UPNSuffix", "NTDomain", "DnsDomain", "Sid", "AadUserId", "ObjectGuid",
                "PUID", "AadTenantId", "DisplayName", "FullName", "LogonId", "IsDomainJoined"),
    "host": ("HostName", "DnsDomain", "NTDomain", "NetBiosName", "FQDN", "AadDeviceId", "MdatpDeviceId", "MachineId",
             "AzureID", "OMSAgentID", "OSFamily", "OSVersion", "IsDomainJoined"),
    "ip": ("Address", "AddressScope"),
    "url": ("Url",),
    "file": ("Name", "Directory", "Size", "SizeInBytes"),
    "filehash": ("Algorithm", "Value"),
    "process": ("ProcessId", "CommandLine", "CreationTimeUtc", "ElevationToken"),
    "mailbox": ("MailboxPrimaryAddress", "Upn", "DisplayName", "AadId", "ExternalDirectoryObjectId"),
    "mailMessage": ("NetworkMessageId", "InternetMessageId", "Subject", "Sender", "P1Sender", "P2Sender",
                    "Recipient", "SenderIP", "ReceivedDate", "DeliveryAction", "DeliveryLocation", "Urls", "Threats"),
    "mailCluster": ("Query", "Source", "MailCount", "NetworkMessageIds"),
    "dns": ("DomainName", "IpAddresses"),
    "cloud-application": ("Name", "AppId", "InstanceName"),
    "oauth-application": ("Name", "OAuthAppId", "OAuthObjectId", "PublisherName", "Permissions"),
    "cloud-logon-session": ("SessionId", "StartTimeUtc", "UserAgent"),
    "azure-resource": ("ResourceId",),
    "registry-key": ("Hive", "Key"),
    "registry-value": ("Name", "Value", "ValueType"),
    "malware": ("Name", "Category"),
    "security-group": ("DistinguishedName", "SID", "ObjectGuid"),
    "iotdevice": ("DeviceId", "DeviceName", "IoTHub"),
    "network-connection": ("SourcePort", "DestinationPort", "Protocol"),
    "host-logon-session": ("SessionId", "StartTimeUtc", "EndTimeUtc"),
}

# Fields that name another entity (inline or by $ref): shown as links, walked for inline definitions.
LINK_FIELDS = ("ImageFile", "ParentProcess", "Account", "Host", "Key", "FileHashes", "LoggedOnUsers", "Files",
               "Processes", "Mailbox", "CloudApplication", "SourceAddress", "DestinationAddress", "IpInterfaces")

# Where an entity may be defined inside another (the walk both backends make): what each kind of entity holds
# inline, by the type its field implies, to three levels. Lists are read to their first three items (a file's
# MD5, SHA1 and SHA256). At the top level the fields of every kind are looked at (the item's own type is not
# needed), so an account's inline host is found by the process rule's ("Host",). Below it a kind already on the
# path is not entered again (a host's logged-on user's host is that host), but for a parent process's parent.
# Defender XDR defines a host wherever it is first named (under a process's image file, under a top-level
# account) with its IpInterfaces inline (tests/data/sample-rows/sekoia_m365d_alert_evidence.json); only a
# process's image file ("image-file", a file) is walked for its host, not every listed file, and an account
# below the top level not at all: each path is one more expression per entity in the KQL, and the KQL is shown.
_HOLDS: dict[str, tuple[tuple[str, str, bool], ...]] = {  # type -> (field, type held, is a list)
    "process": (("ImageFile", "image-file", False), ("ParentProcess", "process", False),
                ("Account", "account", False), ("Host", "host", False)),
    "file": (("FileHashes", "filehash", True),),
    "image-file": (("FileHashes", "filehash", True), ("Host", "host", False)),  # a process's file, and its host
    "host": (("LoggedOnUsers", "account", True), ("IpInterfaces", "ip", True)),
    "registry-value": (("Key", "registry-key", False),),
    "malware": (("Files", "file", True),),
    "cloud-logon-session": (("Account", "account", False),),
    "network-connection": (("SourceAddress", "ip", False), ("DestinationAddress", "ip", False)),
}
_LIST_ITEMS = 3
_DEPTH = 3
Path = tuple[str | int, ...]


def _nested_paths() -> tuple[Path, ...]:
    """Every path (keys and list indices) under a top-level entity at which an inline entity is looked for."""
    paths: list[Path] = []

    def walk(path: Path, kinds: tuple[str, ...], depth: int, above: frozenset[str]) -> None:
        if depth == _DEPTH:
            return
        seen = set()
        for kind in kinds:
            for field, held, many in _HOLDS.get(kind, ()):
                if held in above and held != "process":  # a host's user's host is that host; a parent's parent is not
                    continue
                for step in ([(field, i) for i in range(_LIST_ITEMS)] if many else [(field,)]):
                    child = path + step
                    if child in seen:
                        continue
                    seen.add(child)
                    paths.append(child)
                    walk(child, (held,), depth + 1, above | {held})

    walk((), tuple(_HOLDS), 0, frozenset())
    return tuple(dict.fromkeys(paths))


NESTED_PATHS: tuple[Path, ...] = _nested_paths()


def kql_tostring(value: object) -> str:
    """KQL's tostring() for JSON values: null -> "", booleans lower case, containers as JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return str(value)


def entity_value(entity: object) -> str | None:
    """The identifying value of one entity object, by ENTITY_VALUE_RULES; None when it has none.

    Mirrors the KQL built by ``kql.entity_value_expression`` so both backends agree.
    """
    if not isinstance(entity, dict):
        return None
    kind = entity.get("Type")
    rules = ENTITY_VALUE_RULES.get(kind if isinstance(kind, str) else kql_tostring(kind))
    if not rules:
        return None
    for fields, separator, spaceless in rules:  # each field's text once (it is read for every alert at load)
        values = []
        for position, field in enumerate(fields, 1):
            value = entity.get(field)
            text = value if isinstance(value, str) else kql_tostring(value)
            if not text or (field in spaceless and " " in text) or (position < len(fields) and separator in text):
                break
            values.append(text)
        else:
            joined = separator.join(values)
            if joined not in UNIDENTIFYING.get(kind if isinstance(kind, str) else "", ()):
                return joined
    return None


def parse_entities(raw: Any) -> tuple[list[Any], bool]:
    """The Entities column as a list of items, and whether it was unreadable (not JSON, not an array)."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return [], False
    value = raw
    if isinstance(raw, (str, bytes)):
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):
            return [], True
    if isinstance(value, list):
        return value, False
    return [], True


def _trie(paths: tuple[Path, ...]) -> dict[str | int, Any]:
    """``paths`` as a tree of steps (children in the paths' order), so a walk stops under a step an item lacks."""
    root: dict[str | int, Any] = {}
    for path in paths:
        node = root
        for step in path:
            node = node.setdefault(step, {})
    return root


# NESTED_PATHS is written depth first (a path, then the paths under it), so walking the tree in order visits the
# paths in NESTED_PATHS' order: the same entities in the same order, without looking 45 paths up one by one.
_NESTED_TREE = _trie(NESTED_PATHS)


def _inline(item: Any, tree: dict[str | int, Any]) -> Iterator[dict[str, Any]]:
    for step, below in tree.items():
        if isinstance(step, int):
            child = item[step] if isinstance(item, list) and step < len(item) else None
        else:
            child = item.get(step) if isinstance(item, dict) else None
        if child is None:
            continue
        if isinstance(child, dict) and kql_tostring(child.get("Type")):
            yield child
        if below:
            yield from _inline(child, below)


def defined_entities(items: list[Any], limit: int = MV_EXPAND_LIMIT) -> Iterator[dict[str, Any]]:
    """The entity objects of an alert as the queries see them: each of the first ``limit`` top-level items and the
    objects inline at ``NESTED_PATHS`` under it, those with a Type (a bare ``$ref`` defines nothing)."""
    for top in items[:limit]:
        if isinstance(top, dict) and kql_tostring(top.get("Type")):
            yield top
        yield from _inline(top, _NESTED_TREE)


def alert_entity_values(raw: Any) -> dict[tuple[str, str], str]:
    """{(type, lower-case value): least spelling} of an alert's identifiable entities, as the KQL counts them."""
    items, _ = parse_entities(raw)
    seen: dict[tuple[str, str], str] = {}
    for entity in defined_entities(items):
        value = entity_value(entity)
        if value:
            key = (kql_tostring(entity.get("Type")), value.lower())
            seen[key] = min(seen.get(key, value), value)
    return seen


@dataclass(frozen=True)
class Entity:
    """One entity of an alert: its type ("unknown" when absent or not documented), its canonical value ("" when
    it has none), every identifier it carries, and links to the other entities it names (by field, the linked
    entity's ``label``)."""

    type: str
    value: str
    identifiers: tuple[tuple[str, str], ...] = ()
    links: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        """The value, or for an entity without one its first identifier ("ProcessId 0x940")."""
        if self.value:
            return self.value
        return next((f"{name} {text}" for name, text in self.identifiers), "")

    def identifier(self, name: str) -> str:
        return next((text for field, text in self.identifiers if field == name), "")


@dataclass(frozen=True)
class EntityList:
    """An alert's entities, decoded as far as they go."""

    entities: tuple[Entity, ...] = ()
    unreadable: bool = False  # the column was not a JSON array
    unresolved_refs: int = 0  # $ref to an $id the alert does not define
    dropped: int = 0  # entities past MAX_DECODED_ENTITIES

    def of_type(self, entity_type: str) -> tuple[Entity, ...]:
        return tuple(e for e in self.entities if e.type == entity_type)


def decode_entities(raw: Any) -> EntityList:
    """Every entity of one alert's Entities column (top level and nested, each once), ``$ref`` resolved."""
    items, unreadable = parse_entities(raw)
    objects = list(_all_objects(items))
    by_id: dict[str, dict[str, Any]] = {}
    for obj in objects:
        own_id = kql_tostring(obj.get("$id"))
        if own_id and own_id not in by_id:
            by_id[own_id] = obj
    unresolved = 0
    decoded: dict[tuple[str, str], Entity] = {}
    order: list[tuple[str, str]] = []
    for obj in objects:
        entity, missing = _decode_one(obj, by_id)
        unresolved += missing
        key = (entity.type, entity.value.lower()) if entity.value else (entity.type, f"#{len(order)}")
        if key in decoded:
            decoded[key] = _merged(decoded[key], entity)
        else:
            decoded[key] = entity
            order.append(key)
    kept = order[:MAX_DECODED_ENTITIES]
    return EntityList(tuple(decoded[k] for k in kept), unreadable, unresolved, len(order) - len(kept))


def _all_objects(items: list[Any]) -> Iterator[dict[str, Any]]:
    """Every entity definition (an object with a Type) at the top level or inline under a link field, once each;
    iterative and bounded, so deep or huge input cannot exhaust the stack."""
    stack: list[tuple[Any, int]] = [(item, 0) for item in reversed(items)]
    visited = 0
    while stack and visited < MAX_DECODED_ENTITIES * 4:
        node, depth = stack.pop()
        if isinstance(node, list):
            stack.extend((child, depth) for child in reversed(node[:MAX_DECODED_ENTITIES]))
            continue
        if not isinstance(node, dict) or depth > 8:
            continue
        visited += 1
        if "Type" in node:
            yield node
        for field in reversed(LINK_FIELDS):
            child = node.get(field)
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))


def _decode_one(obj: Mapping[str, Any], by_id: Mapping[str, Mapping[str, Any]]) -> tuple[Entity, int]:
    kind = kql_tostring(obj.get("Type")).strip()
    known = kind if kind in IDENTIFIER_FIELDS else "unknown"
    value = (entity_value(obj) or "") if known != "unknown" else ""
    fields = IDENTIFIER_FIELDS.get(known, ())
    if known == "unknown":  # shown as far as it goes: its plain text fields
        fields = tuple(k for k, v in obj.items() if isinstance(k, str) and not k.startswith("$") and k != "Type"
                       and k not in LINK_FIELDS and isinstance(v, (str, int, float)))[:8] + ("Type",)
    identifiers = _identifiers(obj, fields)
    links: list[tuple[str, str]] = []
    missing = 0
    for field in LINK_FIELDS:
        for target in _targets(obj.get(field)):
            resolved = _resolve(target, by_id)
            if resolved is None:
                missing += 1
                links.append((field, "unknown"))
            elif resolved is not obj:
                links.append((field, _cut(_plain_label(resolved))))
    return Entity(known if kind else "unknown", value, identifiers, tuple(dict.fromkeys(links))), missing


def other_identifiers(obj: Any, value: str) -> tuple[tuple[str, str], ...]:
    """An entity object's documented identifiers other than its value ("Sid", "AadUserId" of an account shown by
    its UPN), as text: what the cards show beside the value. Empty for anything but a typed entity object."""
    if not isinstance(obj, Mapping):
        return ()
    fields = IDENTIFIER_FIELDS.get(kql_tostring(obj.get("Type")), ())
    return tuple((f, t) for f, t in _identifiers(obj, fields) if t.lower() != value.lower())


# The identifiers that name one person or device whatever the spelling (an account seen by its UPN in one alert and
# by its SID or DOMAIN\\name in another is one account when one entity object carries both).
IDENTITY_FIELDS: dict[str, tuple[str, ...]] = {
    "account": ("UserPrincipalName", "Sid", "AadUserId", "ObjectGuid", "PUID"),
    "host": ("FQDN", "AadDeviceId", "MdatpDeviceId", "MachineId", "AzureID", "OMSAgentID"),
}
# Of those, the ones that are ids rather than names: an entity whose value is one of them ranks below one named.
ID_ONLY_FIELDS: dict[str, tuple[str, ...]] = {
    "account": ("Sid", "AadUserId", "ObjectGuid", "PUID"),
    "host": ("AadDeviceId", "MdatpDeviceId", "MachineId", "AzureID", "OMSAgentID"),
}
# A SID ties spellings together only when it names one account everywhere: a domain or Entra account's
# (S-1-5-21-..., S-1-12-1-...). Well-known SIDs (S-1-5-18 LocalSystem, S-1-5-32-544 Administrators) are the same
# on every machine, so two accounts sharing one are not one person. Kusto's startswith ignores letter case.
STRONG_SID_PREFIXES = ("s-1-5-21-", "s-1-12-1-")
NULL_GUID = "00000000-0000-0000-0000-000000000000"


def merge_identities(entities: list[tuple[str, str, tuple[tuple[str, str], ...]]]
                     ) -> list[tuple[str, str, tuple[tuple[str, str], ...]]]:
    """(type, value, identifiers) merged per person and device: entries of one type sharing a strong identifier
    (``IDENTITY_FIELDS``, or one's value being another's identifier) become one, shown by its canonical value (an
    account's UPN when one of them has it, else the least value) with the others' values and identifiers beside
    it. Other types pass through. Order: first appearance."""
    parent = list(range(len(entities)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[tuple[str, str], int] = {}
    for index, (kind, value, identifiers) in enumerate(entities):
        if kind not in IDENTITY_FIELDS:
            continue
        keys = [value.lower()] + [t.lower() for f, t in identifiers
                                  if f in IDENTITY_FIELDS[kind] and strong_identifier(f, t)]
        for key in keys:
            other = owner.setdefault((kind, key), index)
            if other != index:
                parent[root(index)] = root(other)
    groups: dict[int, list[int]] = {}
    for index in range(len(entities)):
        groups.setdefault(root(index), []).append(index)
    merged = []
    for members in sorted(groups.values()):
        kind = entities[members[0]][0]
        values = [entities[i][1] for i in members]
        upns = [v for v in values if "@" in v] if kind == "account" else []
        canonical = min(upns or values)
        collected = [(f, t) for i in members for f, t in entities[i][2]]
        collected += [("Also", v) for v in values if v.lower() != canonical.lower()]
        unique = {(f, t.lower()): (f, t) for f, t in collected if t.lower() != canonical.lower()}
        merged.append((kind, canonical, tuple(unique.values())))
    return merged


def strong_identifier(field: str, text: str) -> bool:
    """Whether an identifier names one person or device wherever it appears: not empty, not the null GUID, and a
    SID only when it is a domain or Entra account's (``STRONG_SID_PREFIXES``)."""
    lower = text.lower()
    if not lower or lower == NULL_GUID:
        return False
    return field != "Sid" or lower.startswith(STRONG_SID_PREFIXES)


def identity_keys(entity: Mapping[str, Any], value: str) -> tuple[str, ...]:
    """The lower-case keys an entity object is known by: its value, then (accounts and hosts) its strong
    identifiers. Mirrors ``kql.identity_keys_expression``."""
    fields = IDENTITY_FIELDS.get(kql_tostring(entity.get("Type")))
    if not fields:
        return (value.lower(),)
    keys = [value.lower()]
    for field in fields:
        raw = entity.get(field)
        text = kql_tostring(raw) if raw is not None else ""
        if text and strong_identifier(field, text):
            keys.append(text.lower())
    return tuple(dict.fromkeys(keys))


def identity_anchor(entity: Mapping[str, Any], value: str) -> str:
    """How well the value names its owner, then the value in lower case: "0alice@contoso.com" (an account's sign-in
    name) before "1contoso\\alice" or "1ws-fin-023" (a name) before "2s-1-5-21-..." (an id only). Of the objects
    sharing a key, the least anchor names them all. Mirrors ``kql.identity_anchor_expression``."""
    kind = kql_tostring(entity.get("Type"))
    lower = value.lower()
    if kind not in ID_ONLY_FIELDS:
        return f"1{lower}"
    if kind == "account" and "@" in lower:
        rank = 0
    elif any(kql_tostring(entity.get(f)).lower() == lower for f in ID_ONLY_FIELDS[kind]):
        rank = 2
    else:
        rank = 1
    return f"{rank}{lower}"


@dataclass(frozen=True)
class Sighting:
    """One identifiable entity object of an alert: its type, value (as spelled), keys and anchor."""

    type: str
    value: str
    keys: tuple[str, ...]
    anchor: str


def alert_sightings(raw: Any) -> list[Sighting]:
    """The identifiable entity objects of an alert as the queries expand them (``defined_entities``)."""
    items, _ = parse_entities(raw)
    out = []
    for entity in defined_entities(items):
        value = entity_value(entity)
        if value:
            out.append(Sighting(kql_tostring(entity.get("Type")), value, identity_keys(entity, value),
                                identity_anchor(entity, value)))
    return out


class IdentityMap:
    """One identity per account and host across spellings, learned from the entity objects of the alerts of the
    lookback (the demo: all its alerts): each key (a value or a strong identifier) goes to the least anchor of the
    objects carrying it, and an object belongs to the least anchor of its keys. One pass, so an object that shares
    no key with a named one keeps its own value; ``kql.resolve_identities`` computes the same in KQL. Other types
    are their lower-case value."""

    def __init__(self) -> None:
        self.anchors: dict[tuple[str, str], str] = {}  # (type, key) -> least anchor carrying it
        self.spellings: dict[tuple[str, str], str] = {}  # (type, lower value) -> least spelling

    def learn(self, sightings: Iterable[Sighting]) -> None:
        for seen in sightings:
            if seen.type not in IDENTITY_FIELDS:
                continue
            for key in seen.keys:
                known = self.anchors.get((seen.type, key))
                if known is None or seen.anchor < known:
                    self.anchors[(seen.type, key)] = seen.anchor
            own = (seen.type, seen.keys[0])
            self.spellings[own] = min(self.spellings.get(own, seen.value), seen.value)

    def resolve(self, entity_type: str, keys: tuple[str, ...], value: str) -> tuple[str, str]:
        """The identity of an entity known by ``keys`` (its own key first) and spelled ``value``: the identity's key
        and the spelling shown for it."""
        if entity_type not in IDENTITY_FIELDS:
            return keys[0], value
        anchors = [self.anchors[(entity_type, k)] for k in keys if (entity_type, k) in self.anchors]
        if not anchors:
            return keys[0], value
        key = min(anchors)[1:]
        return key, self.spellings.get((entity_type, key), value)


@dataclass(frozen=True)
class AlertIdentities:
    """An alert's identifiable entities by identity: {(type, identity key): spelling shown}, and (type, key,
    identity key) for every key its accounts and hosts carry (where a search by that key leads)."""

    shown: dict[tuple[str, str], str]
    aliases: frozenset[tuple[str, str, str]]


def alert_identities(sightings: list[Sighting], identities: IdentityMap) -> AlertIdentities:
    """One alert's sightings resolved, as the KQL does (``kql.resolve_identities``): the sightings of one type and
    spelling are one entity known by all their keys; each identity counts once (an account named by its UPN and,
    inside a host, by its SID is one)."""
    grouped: dict[tuple[str, str], tuple[str, ...]] = {}
    for seen in sightings:
        known = grouped.get((seen.type, seen.value), ())
        grouped[(seen.type, seen.value)] = known + tuple(k for k in seen.keys if k not in known)
    shown: dict[tuple[str, str], str] = {}
    aliases: set[tuple[str, str, str]] = set()
    for (kind, value), keys in grouped.items():
        key, spelling = identities.resolve(kind, keys, value)
        shown[(kind, key)] = min(shown.get((kind, key), spelling), spelling)
        if kind in IDENTITY_FIELDS:
            aliases.update((kind, k, key) for k in keys)
    return AlertIdentities(shown, frozenset(aliases))


def _identifiers(obj: Mapping[str, Any], fields: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """The fields present, as text; containers only for the fields that are lists of values (an app's permissions)."""
    out = []
    for field in fields:
        value = obj.get(field)
        if value is None or value == "" or (isinstance(value, (dict, list)) and field not in _LISTED):
            continue
        out.append((field, _cut(kql_tostring(value))))
    return tuple(out)


_LISTED = ("Permissions", "IpAddresses", "NetworkMessageIds", "Urls", "Threats")


def _targets(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list):
        return [v for v in value[:_LIST_ITEMS * 10] if isinstance(v, dict)]
    return []


def _resolve(target: Mapping[str, Any], by_id: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """An inline object itself, or what its ``$ref`` names (one step: a reference to a reference is not followed,
    so a cycle ends here)."""
    if "$ref" not in target:
        return target
    found = by_id.get(kql_tostring(target.get("$ref")))
    return found if found is not None and "$ref" not in found else None


def _plain_label(obj: Mapping[str, Any]) -> str:
    value = entity_value(dict(obj))
    if value:
        return value
    kind = kql_tostring(obj.get("Type"))
    for field in IDENTIFIER_FIELDS.get(kind, ()):
        text = kql_tostring(obj.get(field))
        if text and not isinstance(obj.get(field), (dict, list)):
            return f"{field} {text}"
    return kind or "unknown"


def _merged(first: Entity, second: Entity) -> Entity:
    identifiers = tuple(dict.fromkeys(first.identifiers + second.identifiers))
    links = tuple(dict.fromkeys(first.links + second.links))
    return Entity(first.type, min(first.value, second.value), identifiers, links)


def _cut(text: str) -> str:
    return text if len(text) <= MAX_IDENTIFIER_CHARS else text[:MAX_IDENTIFIER_CHARS - 1] + "…"
