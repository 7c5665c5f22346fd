"""The Entities column of SecurityAlert: Sentinel-shaped entity JSON built from a cast.

Its own module because the ``$id``/``$ref`` shapes (including an entity defined inline inside another
and listed at the top level only as a reference, as Sentinel does) are what the bot's entity handling
has to cope with, and they are easier to check in one place.

The shape and field names are those of real Defender and Sentinel alerts (Microsoft Learn's entity schemas and
the real samples in tests/data): accounts carry their UserPrincipalName, Sid, AadUserId and ObjectGuid (and about
one in four has the display name in ``Name``, as rules mapping a display-name column write it); hosts their
FQDN, AadDeviceId and MdatpDeviceId; a process its image file with its hashes, its parent process (inline, with
its own image file), its account and its host. Those identifiers are derived from the names by hashing, not drawn
from the random stream, so every other drawn value stays as it was.
"""

from __future__ import annotations

import hashlib
import random
import uuid
import zlib
from collections.abc import Callable
from datetime import datetime, timedelta

from bot.demo.endpoint import device_id
from bot.demo.values import randrange, row_guid, timestamp


def _reported_case(host: str, when: datetime) -> str:
    """The host name as a product reports it: about one alert in four has it in the other letter case
    ("MSTICAlertsLxVM2" and "MSTICALERTSLXVM2" in one real workspace). From a hash, not the random
    stream, so every other drawn value stays as it was."""
    if zlib.crc32(f"{host}|{when:%Y-%m-%dT%H}".encode()) % 4:
        return host
    return host.lower() if host.isupper() else host.upper()


def alert_entities(kinds: tuple[str, ...], cast: dict, rng: random.Random, when: datetime) -> list[dict]:
    """Sentinel-shaped entities: "$id" on every item, nested references as {"$ref": id}.

    About 1 in 10 alerts (where the shape allows) defines an entity inline inside another one and lists
    it at the top level only as {"$ref": id}, as Sentinel does.
    """
    wanted = set(kinds)
    inline = _inline(rng, wanted)
    entities = _Entities()
    host_id, account_id = _add_host_and_account(entities, wanted, inline == "account", cast, when)
    for kind, fields in _PLAIN_ENTITIES:
        if kind in wanted:
            entities.add(fields(cast))
    if "file" in wanted:
        _add_file(entities, cast, inline == "file")
    if "process" in wanted:
        _add_process(entities, rng, cast, when, inline == "process", host_id, account_id)
    return entities.items


class _Entities:
    """An alert's entities, each "$id" numbered in the order they are written."""

    def __init__(self) -> None:
        self.items: list[dict] = []
        self._count = 0

    def next_id(self) -> str:
        self._count += 1
        return str(self._count)

    def add(self, fields: dict) -> str:
        entity_id = self.next_id()
        self.items.append({"$id": entity_id, **fields})
        return entity_id


def _inline(rng: random.Random, wanted: set[str]) -> str | None:
    """Which entity kind, if any, this alert defines inside another (one in five draws, where the shape allows)."""
    if rng.random() >= 0.2:
        return None
    if "process" in wanted:
        return "process"
    if "account" in wanted and "host" in wanted:
        return "account"
    return "file" if "file" in wanted else None


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("|".join(parts).encode()).digest()


def _guid(*parts: str) -> str:
    return str(uuid.UUID(bytes=_digest(*parts)[:16], version=4))


def sid(name: str) -> str:
    """A domain account's SID: the domain's part fixed, the relative id from the name."""
    return f"S-1-5-21-1004336348-1177238915-682003330-{1000 + zlib.crc32(name.lower().encode()) % 90000}"


def _host_fields(cast: dict, when: datetime) -> dict:
    host = cast["host"]
    windows = cast["host_os"] == "Windows"
    fields = {"HostName": _reported_case(host, when), "DnsDomain": "corp.contoso.com" if windows else "",
              "NetBiosName": host, "OSFamily": cast["host_os"], "Type": "host"}
    if windows:
        fields["NTDomain"] = "CONTOSO"
    fields.update(_device_ids(host, windows))
    return fields


def _device_ids(host: str, windows: bool) -> dict:
    """A device's FQDN and Entra device id (domain-joined Windows) and Defender device id, as its activity rows."""
    ids = {"FQDN": f"{host.lower()}.corp.contoso.com", "AadDeviceId": row_guid("aad-device", host)} if windows else {}
    return ids | {"MdatpDeviceId": device_id(host)}  # the ids DeviceInfo and the Device* tables carry


def _account_fields(cast: dict, wanted: set[str], when: datetime) -> dict:
    if cast.get("local_account"):
        return {"Name": cast["sam"], "NTDomain": cast["host"], "Type": "account"}
    if "host" in wanted and zlib.crc32(f"{cast['sam']}|{when:%Y-%m-%dT%H}".encode()) % 5 == 0:
        return _device_account(cast["sam"], cast["aad"])
    return _domain_account(cast["sam"], cast["upn"], cast["aad"], cast.get("user", ""), "host" in wanted)


def _device_account(sam: str, aad: str) -> dict:
    """A domain account as an endpoint product names the user on a device, about one alert in five (from a hash):
    sign-in name, domain, SID and Entra object id, but no UserPrincipalName, so it reads "CONTOSO\\sam" and is tied
    to the person's UPN by the SID and object id other alerts carry with it."""
    return {"Name": sam, "NTDomain": "CONTOSO", "Sid": sid(sam), "AadUserId": aad, "IsDomainJoined": True,
            "Type": "account"}


def _domain_account(sam: str, upn: str, aad: str, display: str, on_host: bool) -> dict:
    """A domain account as Defender writes it; one in four (by name) has the display name in ``Name``."""
    shows_display = bool(display) and zlib.crc32(sam.encode()) % 4 == 0
    fields = {"Name": display if shows_display else sam, "UPNSuffix": upn.partition("@")[2] or "contoso.com",
              "UserPrincipalName": upn, "AadUserId": aad, "Sid": sid(sam), "ObjectGuid": _guid("ad", sam),
              "Type": "account"}
    if display:
        fields["DisplayName"] = display
    if on_host:
        fields["NTDomain"] = "CONTOSO"
    return fields


def _add_host_and_account(entities: _Entities, wanted: set[str], inline: bool, cast: dict,
                          when: datetime) -> tuple[str | None, str | None]:
    """The host and the account (the host inside the account when ``inline``): their ids, None for one not wanted."""
    host_fields, account_fields = _host_fields(cast, when), _account_fields(cast, wanted, when)
    host_id = account_id = None
    if "host" in wanted and not inline:
        host_id = entities.add(host_fields)
    if "account" in wanted and inline:
        account_id, host_id = entities.next_id(), entities.next_id()
        entities.items.append({"$id": account_id, **account_fields, "Host": {"$id": host_id, **host_fields}})
        entities.items.append({"$ref": host_id})
    elif "account" in wanted:
        account_id = entities.add(account_fields)
    return host_id, account_id


# The entities that stand alone (no references in or out), in the order they are written, by kind.
_PLAIN_ENTITIES: tuple[tuple[str, Callable[[dict], dict]], ...] = (
    ("account2", lambda cast: _domain_account(cast["actor_sam"], cast["actor"], cast["actor_aad"], "", False)),
    ("host2", lambda cast: {"HostName": cast["host2"], "DnsDomain": "corp.contoso.com", "NetBiosName": cast["host2"],
                            "OSFamily": "Windows", "NTDomain": "CONTOSO", **_device_ids(cast["host2"], True),
                            "Type": "host"}),
    ("ip", lambda cast: {"Address": cast["ip"], "Location": {"CountryCode": cast["country_code"],
                                                             "CountryName": cast["country"], "City": cast["city"]},
                         "Type": "ip"}),
    ("ip2", lambda cast: {"Address": cast["ip2"], "Location": {"CountryCode": cast["country_code2"],
                                                               "CountryName": cast["country2"], "City": cast["city2"]},
                          "Type": "ip"}),
    ("ip_int", lambda cast: {"Address": cast["host_ip"], "Type": "ip"}),
    ("scanner_ip", lambda cast: {"Address": cast["scanner_ip"], "Type": "ip"}),
    ("mailbox", lambda cast: {"MailboxPrimaryAddress": cast["upn"], "Upn": cast["upn"], "DisplayName": cast["user"],
                              "Type": "mailbox"}),
    ("app", lambda cast: {"Name": cast["app"], "AppId": cast["app_id"], "Type": "cloud-application"}),
    ("oauth", lambda cast: {"Name": cast["oauth_app"], "OAuthAppId": cast["oauth_id"],
                            "OAuthObjectId": _guid("oauth", cast["oauth_id"]), "Type": "oauth-application"}),
    ("dns", lambda cast: {"DomainName": cast["domain"], "Type": "dns"}),
    ("url", lambda cast: {"Url": cast["url"], "Type": "url"}),
)


def _add_file(entities: _Entities, cast: dict, inline: bool) -> None:
    """The file and its hash (the hash inside the file when ``inline``)."""
    hash_fields = {"Algorithm": "SHA256", "Value": cast["sha256"], "Type": "filehash"}
    if inline:
        file_id, hash_id = entities.next_id(), entities.next_id()
        entities.items.append({"$id": file_id, "Name": cast["file"], "Directory": cast["file_dir"],
                               "FileHashes": [{"$id": hash_id, **hash_fields}], "Type": "file"})
        entities.items.append({"$ref": hash_id})
    else:
        hash_id = entities.add(hash_fields)
        entities.add({"Name": cast["file"], "Directory": cast["file_dir"], "FileHashes": [{"$ref": hash_id}],
                      "Type": "file"})


def _add_process(entities: _Entities, rng: random.Random, cast: dict, when: datetime, inline: bool,
                 host_id: str | None, account_id: str | None) -> None:
    """The process, its image file (inside the process when ``inline``) and the image's hash."""
    hash_id = entities.add({"Algorithm": "SHA256", "Value": cast["proc_sha256"], "Type": "filehash"})
    image = {"Name": cast["cmd_image"], "Directory": cast["cmd_dir"], "FileHashes": [{"$ref": hash_id}],
             "Type": "file"}
    if inline:
        process_id, image_id = entities.next_id(), entities.next_id()
        image_ref: dict = {"$id": image_id, **image}
    else:
        image_id = entities.add(image)
        process_id = entities.next_id()
        image_ref = {"$ref": image_id}
    created = when - timedelta(seconds=randrange(rng, 5, 600))
    process = {"$id": process_id, "ProcessId": cast["pid"], "CommandLine": cast["cmd"],
               "CreationTimeUtc": timestamp(created)[:-4] + "Z", "ImageFile": image_ref,
               "ParentProcess": _parent_process(entities, cast, created, host_id)}
    if host_id is not None:
        process["Host"] = {"$ref": host_id}
    if account_id is not None:
        process["Account"] = {"$ref": account_id}
    process["Type"] = "process"
    entities.items.append(process)
    entities.items.append({"$ref": process["ParentProcess"]["$id"]})  # listed at the top level by reference
    if inline:
        entities.items.append({"$ref": image_id})


def _parent_process(entities: _Entities, cast: dict, created: datetime, host_id: str | None) -> dict:
    """The process's parent, inline as Defender writes it: its id, command line and image file with its hashes.
    A noise alert's parent (its cast names none) is the shell, written without a command line as Defender often
    does, so one shell does not top every entity count."""
    name = cast.get("parent") or "explorer.exe"
    directory = "C:\\Program Files\\Microsoft Office\\root\\Office16" if name == "winword.exe" else "C:\\Windows"
    parent_id, image_id, sha1_id, sha256_id = (entities.next_id() for _ in range(4))
    digest = _digest("image", name)
    parent: dict = {
        "$id": parent_id, "ProcessId": str(500 + zlib.crc32(f"{cast['pid']}|{name}".encode()) % 8000),
        "CommandLine": f'"{directory}\\{name}"',
        "CreationTimeUtc": timestamp(created - timedelta(minutes=3 + digest[0] % 50))[:-4] + "Z",
        "ImageFile": {"$id": image_id, "Name": name, "Directory": directory,
                      "FileHashes": [{"$id": sha1_id, "Algorithm": "SHA1", "Value": digest.hex()[:40],
                                      "Type": "filehash"},
                                     {"$id": sha256_id, "Algorithm": "SHA256", "Value": _digest("sha256", name).hex(),
                                      "Type": "filehash"}],
                      "Type": "file"},
    }
    if host_id is not None:
        parent["Host"] = {"$ref": host_id}
    if not cast.get("parent"):
        del parent["CommandLine"]
    parent["Type"] = "process"
    return parent
