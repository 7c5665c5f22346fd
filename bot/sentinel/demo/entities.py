"""The Entities column of SecurityAlert: Sentinel-shaped entity JSON built from a cast.

Its own module because the ``$id``/``$ref`` shapes (including an entity defined inline inside another
and listed at the top level only as a reference, as Sentinel does) are what the bot's entity handling
has to cope with, and they are easier to check in one place.
"""

from __future__ import annotations

import random
import zlib
from datetime import datetime, timedelta

from bot.sentinel.demo.values import randrange, timestamp


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
    items: list[dict] = []
    counter = 0

    def next_id() -> str:
        nonlocal counter
        counter += 1
        return str(counter)

    def add(fields: dict) -> str:
        entity_id = next_id()
        items.append({"$id": entity_id, **fields})
        return entity_id

    wanted = set(kinds)
    has_process = "process" in wanted
    mode = None
    if rng.random() < 0.2:
        if has_process:
            mode = "process"
        elif "account" in wanted and "host" in wanted:
            mode = "account"
        elif "file" in wanted:
            mode = "file"
    windows = cast["host_os"] == "Windows"
    host_fields = {"HostName": _reported_case(cast["host"], when), "DnsDomain": "corp.contoso.com" if windows else "",
                   "NetBiosName": cast["host"], "OSFamily": cast["host_os"], "Type": "host"}
    if windows:
        host_fields["NTDomain"] = "CONTOSO"
    if cast.get("local_account"):
        account_fields = {"Name": cast["sam"], "NTDomain": cast["host"], "Type": "account"}
    else:
        account_fields = {"Name": cast["sam"], "UPNSuffix": "contoso.com", "AadUserId": cast["aad"],
                          "Type": "account"}
        if "host" in wanted:
            account_fields["NTDomain"] = "CONTOSO"
    host_id = account_id = None
    if "host" in wanted and mode != "account":
        host_id = add(host_fields)
    if "account" in wanted:
        if mode == "account":
            account_id = next_id()
            host_id = next_id()
            items.append({"$id": account_id, **account_fields, "Host": {"$id": host_id, **host_fields}})
            items.append({"$ref": host_id})
        else:
            account_id = add(account_fields)
    if "account2" in wanted:
        add({"Name": cast["actor_sam"], "UPNSuffix": "contoso.com", "AadUserId": cast["actor_aad"], "Type": "account"})
    if "host2" in wanted:
        add({"HostName": cast["host2"], "DnsDomain": "corp.contoso.com", "NetBiosName": cast["host2"],
             "OSFamily": "Windows", "NTDomain": "CONTOSO", "Type": "host"})
    if "ip" in wanted:
        add({"Address": cast["ip"], "Location": {"CountryCode": cast["country_code"], "CountryName": cast["country"],
                                                 "City": cast["city"]}, "Type": "ip"})
    if "ip2" in wanted:
        add({"Address": cast["ip2"], "Location": {"CountryCode": cast["country_code2"],
                                                  "CountryName": cast["country2"], "City": cast["city2"]},
             "Type": "ip"})
    if "ip_int" in wanted:
        add({"Address": cast["host_ip"], "Type": "ip"})
    if "scanner_ip" in wanted:
        add({"Address": cast["scanner_ip"], "Type": "ip"})
    if "mailbox" in wanted:
        add({"MailboxPrimaryAddress": cast["upn"], "Upn": cast["upn"], "DisplayName": cast["user"],
             "Type": "mailbox"})
    if "app" in wanted:
        add({"Name": cast["app"], "AppId": cast["app_id"], "Type": "cloud-application"})
    if "oauth" in wanted:
        add({"Name": cast["oauth_app"], "AppId": cast["oauth_id"], "Type": "cloud-application"})
    if "dns" in wanted:
        add({"DomainName": cast["domain"], "Type": "dns"})
    if "url" in wanted:
        add({"Url": cast["url"], "Type": "url"})
    if "file" in wanted:
        hash_fields = {"Algorithm": "SHA256", "Value": cast["sha256"], "Type": "filehash"}
        if mode == "file":
            file_id = next_id()
            hash_id = next_id()
            items.append({"$id": file_id, "Name": cast["file"], "Directory": cast["file_dir"],
                          "FileHashes": [{"$id": hash_id, **hash_fields}], "Type": "file"})
            items.append({"$ref": hash_id})
        else:
            hash_id = add(hash_fields)
            add({"Name": cast["file"], "Directory": cast["file_dir"], "FileHashes": [{"$ref": hash_id}],
                 "Type": "file"})
    if has_process:
        hash_id = add({"Algorithm": "SHA256", "Value": cast["proc_sha256"], "Type": "filehash"})
        image = {"Name": cast["cmd_image"], "Directory": cast["cmd_dir"], "FileHashes": [{"$ref": hash_id}],
                 "Type": "file"}
        if mode == "process":
            process_id = next_id()
            image_id = next_id()
            image_ref: dict = {"$id": image_id, **image}
        else:
            image_id = add(image)
            process_id = next_id()
            image_ref = {"$ref": image_id}
        process = {"$id": process_id, "ProcessId": cast["pid"], "CommandLine": cast["cmd"],
                   "CreationTimeUtc": timestamp(when - timedelta(seconds=randrange(rng, 5, 600)))[:-4] + "Z",
                   "ImageFile": image_ref}
        if host_id is not None:
            process["Host"] = {"$ref": host_id}
        if account_id is not None:
            process["Account"] = {"$ref": account_id}
        process["Type"] = "process"
        items.append(process)
        if mode == "process":
            items.append({"$ref": image_id})
    return items
