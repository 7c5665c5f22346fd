"""People and machines of one seed, and the cast of one incident or alert.

``build_world`` turns the catalog into one seed's users, admins, analysts, machines and addresses;
``draw_cast`` draws from it every name, address and number an incident's or alert's texts and entities
may mention, so templates, descriptions and entities all read the same dict.
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass, field

from bot.demo.catalog import (
    ADMINS,
    ANALYSTS,
    ATTACKER_LOCATIONS,
    CLOUD_APPS,
    HOME_LOCATIONS,
    HOSTILE_COMMANDS,
    HOSTILE_RULE_NAMES,
    HOSTILE_SUBJECTS,
    HOSTILE_USER_AGENTS,
    HOT_HOST,
    HOT_USER,
    KIOSK_HOST,
    LINUX_VMS,
    MALICIOUS_DOMAINS,
    MALWARE_FILES,
    OAUTH_APPS,
    PHISH_SENDERS,
    PHISH_SUBJECTS,
    PLAYGROUND_ANALYSTS,
    PS_DIR,
    PUAS,
    RANSOM_EXTENSIONS,
    ROLES,
    RULE_NAMES,
    SCANNER_HOST,
    SCANNER_IP,
    SERVERS,
    SERVICE_ACCOUNT,
    URL_PATHS,
    USERS,
)
from bot.demo.values import choice, compact_json, fill, guid, randrange, stable_int, static_guid

# --------------------------------------------------------------------------------------------------
# People and machines of one seed.


@dataclass(frozen=True)
class Person:
    display: str
    sam: str
    upn: str
    aad: str
    host: str


@dataclass(frozen=True)
class Machine:
    name: str
    os: str
    ip: str


@dataclass
class World:
    seed: int
    users: list[Person]
    service: Person
    admins: list[Person]
    analysts: list[dict]  # Owner objects
    machines: dict[str, Machine]
    attacker_ips: list[str]
    home_ips: dict[str, str]
    owner_texts: dict[str | None, str] = field(default_factory=dict)  # Owner JSON by objectId (None: unassigned)
    rule_ids: dict[str, str] = field(default_factory=dict)

    def owner_json(self, owner: dict) -> str:
        return self.owner_texts[owner["objectId"]]

    def rule_id(self, name: str) -> str:
        if name not in self.rule_ids:
            self.rule_ids[name] = static_guid(self.seed, "rule", name)
        return self.rule_ids[name]


def _internal_ip(name: str) -> str:
    value = zlib.crc32(name.encode())
    return f"10.{10 + value % 20}.{(value >> 8) % 250 + 1}.{(value >> 16) % 250 + 2}"


def build_world(seed: int) -> World:
    rng = random.Random(stable_int("sentinel-demo", seed, "world"))
    users = []
    for index, (first, last, dept) in enumerate(USERS):
        sam = f"{first}.{last}".lower()
        prefix = "LT" if dept == "SALES" else "WS"
        host = HOT_HOST if index == HOT_USER else f"{prefix}-{dept}-{(index * 37 + 11) % 180 + 1:03d}"
        users.append(Person(f"{first} {last}", sam, f"{sam}@contoso.com", guid(rng), host))
    service = Person("Backup service account", SERVICE_ACCOUNT, f"{SERVICE_ACCOUNT}@contoso.com", guid(rng),
                     "SRV-BKP-01")
    admins = [Person(f"{a[4:].replace('.', ' ').title()} (admin)", a, f"{a}@contoso.com", guid(rng), "SRV-RDS-01")
              for a in ADMINS]
    analysts = []
    for name in ANALYSTS:
        # The Playground's users keep its tenant's names and ids (drawing none keeps every other value as it was).
        email, object_id = PLAYGROUND_ANALYSTS.get(name) or (name.lower().replace(" ", ".") + "@contoso.com", "")
        object_id = object_id or guid(rng)
        analysts.append({"objectId": object_id, "email": email, "assignedTo": name, "userPrincipalName": email})
    machines = {}
    for person in users:
        machines[person.host] = Machine(person.host, "Windows", _internal_ip(person.host))
    for name in SERVERS + (KIOSK_HOST,):
        machines[name] = Machine(name, "Windows", _internal_ip(name))
    for name in LINUX_VMS:
        machines[name] = Machine(name, "Linux", _internal_ip(name))
    machines[SCANNER_HOST] = Machine(SCANNER_HOST, "Linux", SCANNER_IP)
    attacker_ips = sorted({f"203.0.113.{randrange(rng, 2, 254)}" for _ in range(16)}
                          | {f"198.51.100.{randrange(rng, 2, 254)}" for _ in range(10)})
    home_ips = {p.upn: f"192.0.2.{10 + i * 7 % 240}" for i, p in enumerate(users + admins + [service])}
    world = World(seed, users, service, admins, analysts, machines, attacker_ips, home_ips)
    world.owner_texts = {a["objectId"]: compact_json(a) for a in analysts}
    world.owner_texts[None] = compact_json({"objectId": None, "email": None, "assignedTo": None,
                                            "userPrincipalName": None})
    return world


def ip_location(ip: str, home: bool = False) -> tuple[str, str, str]:
    table = HOME_LOCATIONS if home else ATTACKER_LOCATIONS
    return table[zlib.crc32(ip.encode()) % len(table)]


# --------------------------------------------------------------------------------------------------
# The cast of one incident or alert: every value its texts and entities may mention.


def draw_cast(world: World, rng: random.Random, host_kind: str, user_kind: str, severity: str,
              commands=(), files=(), hostile: bool = False, light: bool = False) -> dict:
    """Names, addresses and numbers for one incident or alert. ``light`` skips the values only incident
    templates mention (standalone noise alerts are most of the rows, and this is the hot path)."""
    hot = severity == "High" and rng.random() < 0.25
    person = _person(world, rng, user_kind, hot)
    host = _host(world, rng, host_kind, user_kind, person, hot)
    bits = _Bits(rng.getrandbits(320))
    cast = _common_values(world, rng, bits, person, host)
    if not light:
        cast.update(_incident_values(world, rng, bits, person, host))
    if user_kind == "local":
        cast["sam"] = bits.pick(("root", "azureuser", "admin", "ubuntu"))
        cast["local_account"] = True
    _add_command_and_file(cast, bits, commands, files)
    if hostile:
        _make_hostile(rng, cast, bool(commands))
    return cast


class _Bits:
    """The many small choices of a cast, from one 320-bit draw (much faster than one draw each)."""

    __slots__ = ("bits",)

    def __init__(self, bits: int) -> None:
        self.bits = bits

    def pick(self, options):
        self.bits, index = divmod(self.bits, len(options))
        return options[index]

    def between(self, low: int, high: int) -> int:
        return low + self.pick(range(high - low))


def _person(world: World, rng: random.Random, user_kind: str, hot: bool) -> Person:
    if user_kind == "svc":
        return world.service
    if hot:
        return world.users[HOT_USER]
    return choice(rng, world.users)


def _host(world: World, rng: random.Random, host_kind: str, user_kind: str, person: Person, hot: bool) -> str:
    """The incident's machine, by the template's kind of host (the user's own, a server, a Linux VM, ...)."""
    if host_kind == "user":
        return person.host
    if host_kind == "any":
        return person.host if hot or rng.random() < 0.65 else choice(rng, SERVERS)
    if host_kind == "server":
        return person.host if user_kind == "svc" and rng.random() < 0.5 else choice(rng, SERVERS)
    if host_kind == "linux":
        return choice(rng, LINUX_VMS)
    if host_kind == "kiosk":
        return KIOSK_HOST if rng.random() < 0.85 else choice(rng, world.users).host
    if host_kind == "scanner":
        return SCANNER_HOST if rng.random() < 0.3 else choice(rng, world.users).host
    return choice(rng, SERVERS)


def _common_values(world: World, rng: random.Random, bits: _Bits, person: Person, host: str) -> dict:
    """The values every alert may mention: who, where, what was downloaded, from which address."""
    machine = world.machines[host]
    ip = bits.pick(world.attacker_ips)
    country_code, country, city = ip_location(ip)
    domain = bits.pick(MALICIOUS_DOMAINS)
    app, app_id = bits.pick(CLOUD_APPS)
    sha256 = f"{rng.getrandbits(256):064x}"
    return {
        "user": person.display, "sam": person.sam, "upn": person.upn, "aad": person.aad,
        "host": host, "host_os": machine.os, "host_ip": machine.ip,
        "ip": ip, "country_code": country_code, "country": country, "city": city,
        "domain": domain, "url": f"https://{domain}{bits.pick(URL_PATHS)}", "app": app, "app_id": app_id,
        "n": bits.between(25, 400), "n2": bits.between(3, 14), "pua": bits.pick(PUAS),
        "sha256": sha256, "sha256_short": sha256[:12], "proc_sha256": f"{rng.getrandbits(256):064x}",
        "pid": str(bits.between(900, 24000)), "user_agent": "",
        "subject": bits.pick(PHISH_SUBJECTS), "sender": bits.pick(PHISH_SENDERS),
    }


def _incident_values(world: World, rng: random.Random, bits: _Bits, person: Person, host: str) -> dict:
    """The values only incident templates mention: a second host and address, an admin, a rule, sizes, times."""
    host2 = bits.pick(SERVERS)
    if host2 == host:
        host2 = SERVERS[(SERVERS.index(host2) + 1) % len(SERVERS)]
    home_ip = world.home_ips[person.upn]
    country_code2, country2, city2 = ip_location(home_ip, home=True)
    actor = bits.pick(world.admins)
    return {
        "host2": host2, "host2_ip": world.machines[host2].ip, "ip2": home_ip, "country_code2": country_code2,
        "country2": country2, "city2": city2, "actor": actor.upn, "actor_sam": actor.sam, "actor_aad": actor.aad,
        "oauth_app": bits.pick(OAUTH_APPS), "oauth_id": guid(rng), "role": bits.pick(ROLES),
        "rule": bits.pick(RULE_NAMES), "fwd": f"{person.sam.split('.')[0]}.{bits.between(10, 99)}@outlook.test",
        "minutes": bits.between(6, 90), "mb": bits.between(250, 4200), "interval": bits.pick((30, 60, 300, 600)),
        "hours": bits.between(3, 20), "ext": bits.pick(RANSOM_EXTENSIONS), "ext_dir": f"{bits.between(0, 2**32):08x}",
        "ti_label": bits.pick(("a phishing domain", "a Qakbot C2 domain", "a malware download site")),
        "parent": bits.pick(("winword.exe", "explorer.exe", "wscript.exe", "outlook.exe")),
    }


def _add_command_and_file(cast: dict, bits: _Bits, commands, files) -> None:
    """The command line and the file the alerts mention: the template's own, else PowerShell and a malware file."""
    directory, image, command = bits.pick(commands) if commands else (PS_DIR, "powershell.exe", "")
    file_dir, file_name = bits.pick(files) if files else bits.pick(MALWARE_FILES)
    cast.update(cmd_dir=directory, cmd_image=image.split("\\")[-1], cmd=command, file_dir_raw=file_dir)
    cast["file"] = fill(file_name, cast)
    cast["file_dir"] = fill(file_dir, cast)
    cast["cmd"] = fill(command, cast)


def _make_hostile(rng: random.Random, cast: dict, has_process: bool) -> None:
    cast["hostile"] = True
    if has_process:
        directory, image, command = choice(rng, HOSTILE_COMMANDS)
        cast.update(cmd_dir=directory, cmd_image=image, cmd=command)
    cast["subject"] = choice(rng, HOSTILE_SUBJECTS)
    cast["rule"] = choice(rng, HOSTILE_RULE_NAMES)
    cast["user_agent"] = choice(rng, HOSTILE_USER_AGENTS)
