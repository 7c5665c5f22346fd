"""Builds the Teams app package: the zip with manifest.json, color.png and outline.png to upload to Teams.

``python -m bot package --app-id GUID --domain bot.example.com [--version 1.0.0] [--out PATH]`` fills the
template appPackage/manifest.json (placeholders ``{{NAME}}`` inside its strings), checks the result against
the rules of manifest schema 1.30 that this app touches, and writes the zip. With ``--sso-app-id GUID``
(on-behalf-of mode, QUERY_IDENTITY=user) the manifest also gets Teams single sign-on: ``webApplicationInfo``
naming that app registration and its API ``api://botid-<app id>``, and the Bot Framework token service among
the valid domains (the sign-in card's fallback page). The full schema validation
runs in the tests (tests/app/test_app_package.py), so building needs nothing but the standard library.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import re
import struct
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

SOURCE = Path(__file__).resolve().parent.parent / "appPackage"
MANIFEST = "manifest.json"
ICON_SIZES = {"color.png": 192, "outline.png": 32}  # Teams: colour 192x192, outline 32x32
PACKAGE_FILES = (MANIFEST, *ICON_SIZES)
MANIFEST_VERSION = "1.30"
DEFAULT_OUT = Path("dist/sentinel-assistant.zip")
DEFAULT_VERSION = "1.0.0"
# Placeholders, honest about being placeholders: example.com is reserved for documentation (RFC 2606).
DEFAULT_DEVELOPER_URL = "https://example.com"
DEFAULT_DEVELOPER_NAME = "Sentinel Assistant (self-hosted)"
TOKEN_SERVICE_DOMAIN = "token.botframework.com"  # where the OAuth card's Sign in button goes

_GUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")
_SEMVER = re.compile(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)")
_PLACEHOLDER = re.compile(r"\{\{([A-Z_]+)\}\}")
_HEX_COLOR = re.compile(r"#[0-9a-fA-F]{6}")
# Zip entries get a fixed timestamp, so the same inputs build the same bytes.
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


class PackageError(ValueError):
    """Input or template that cannot make a valid package; the message says what to change."""


@dataclass(frozen=True)
class PackageInputs:
    app_id: str
    domain: str
    version: str = DEFAULT_VERSION
    developer_name: str = DEFAULT_DEVELOPER_NAME
    developer_url: str = DEFAULT_DEVELOPER_URL
    sso_app_id: str | None = None  # the app registration Teams single sign-on issues tokens to (SSO_APP_ID)

    @classmethod
    def checked(cls, app_id: str, domain: str, version: str = DEFAULT_VERSION,
                developer_name: str = DEFAULT_DEVELOPER_NAME,
                developer_url: str = DEFAULT_DEVELOPER_URL, sso_app_id: str | None = None) -> PackageInputs:
        """The inputs, validated and normalised (lower-case GUID and host, no trailing slash on the URL)."""
        return cls(_app_id(app_id), _domain(domain), _version(version), _developer_name(developer_name),
                   _developer_url(developer_url), _app_id(sso_app_id, "--sso-app-id") if sso_app_id else None)

    def single_sign_on(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """``manifest`` with Teams single sign-on when an SSO app registration is given (unchanged otherwise)."""
        if not self.sso_app_id:
            return manifest
        domains = [*manifest.get("validDomains", []), TOKEN_SERVICE_DOMAIN]
        return manifest | {"webApplicationInfo": {"id": self.sso_app_id, "resource": f"api://botid-{self.app_id}"},
                           "validDomains": list(dict.fromkeys(domains))}

    def placeholders(self) -> dict[str, str]:
        return {"MICROSOFT_APP_ID": self.app_id, "BOT_DOMAIN": self.domain, "APP_VERSION": self.version,
                "DEVELOPER_NAME": self.developer_name, "DEVELOPER_URL": self.developer_url}


# ---- inputs -----------------------------------------------------------------------------------------------

_APP_ID_HELP = {"--app-id": "the bot's Microsoft App ID (MICROSOFT_APP_ID: with a user-assigned managed identity, "
                            "its client id)",
                "--sso-app-id": "the client id of the app registration Teams single sign-on issues tokens to "
                                "(SSO_APP_ID)"}


def _app_id(value: str, option: str = "--app-id") -> str:
    guid = value.strip().lower()
    if not _GUID.fullmatch(guid):
        raise PackageError(
            f'{option} "{value}" is not a GUID. Give {_APP_ID_HELP[option]}, e.g. '
            "00000000-1111-2222-3333-444444444444.")
    if set(guid) <= {"0", "-"}:
        raise PackageError(f"{option} is the all-zero GUID, a placeholder: give {_APP_ID_HELP[option]}.")
    return guid


def _domain(value: str) -> str:
    host = value.strip().lower().rstrip(".")
    if "://" in host or "/" in host or ":" in host:
        raise PackageError(
            f'--domain "{value}" should be the bot\'s host name alone, without scheme, port or path: '
            f'e.g. "{urlsplit(host if "://" in host else "https://" + host).hostname or "bot.example.com"}".')
    if _is_ip_address(host):
        raise PackageError(f'--domain "{value}" is an IP address; Teams needs the bot\'s DNS host name.')
    labels = host.split(".")
    if len(host) > 253 or len(labels) < 2 or not all(_LABEL.fullmatch(label) for label in labels) \
            or labels[-1].isdigit():
        raise PackageError(
            f'--domain "{value}" is not a host name like bot.example.com (letters, digits and hyphens, '
            "at least two labels): give the host of the bot's messaging endpoint.")
    return host


def _is_ip_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _version(value: str) -> str:
    if not _SEMVER.fullmatch(value.strip()):
        raise PackageError(
            f'--version "{value}" is not MAJOR.MINOR.PATCH (e.g. 1.0.0). Raise it for every upload that '
            "changes the package, so that Teams treats the upload as an update.")
    return value.strip()


def _developer_name(value: str) -> str:
    name = " ".join(value.split())
    if not 1 <= len(name) <= 32:
        raise PackageError(f'--developer-name "{value}" must be 1 to 32 characters (Teams\' limit).')
    return name


def _developer_url(value: str) -> str:
    url = value.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname or parts.query or parts.fragment or len(url) > 2000:
        raise PackageError(
            f'--developer-url "{value}" must be an https URL without query or fragment, e.g. '
            "https://security.contoso.com/sentinel-assistant (its /privacy and /terms pages are linked too).")
    return url


# ---- the manifest -----------------------------------------------------------------------------------------

def render(template: Any, values: dict[str, str]) -> Any:
    """``template`` with every ``{{NAME}}`` inside its strings replaced; values never become JSON syntax."""
    if isinstance(template, dict):
        return {key: render(item, values) for key, item in template.items()}
    if isinstance(template, list):
        return [render(item, values) for item in template]
    if isinstance(template, str):
        unknown = sorted({name for name in _PLACEHOLDER.findall(template) if name not in values})
        if unknown:
            raise PackageError(f"The manifest template uses unknown placeholders: {', '.join(unknown)}.")
        return _PLACEHOLDER.sub(lambda match: values[match.group(1)], template)
    return template


def check_manifest(manifest: dict[str, Any]) -> list[str]:
    """Problems with the rules of manifest 1.30 (and Teams' command-menu limits) this app depends on.

    A light structural check for build time; tests validate the full official schema.
    """
    problems: list[str] = []

    def need(condition: bool, problem: str) -> None:
        if not condition:
            problems.append(problem)

    for check in (_check_fields, _check_lengths, _check_developer_and_icons, _check_bot, _check_domains_and_sign_on,
                  _check_compose_extension):
        check(manifest, need)
    leftover = sorted(set(_PLACEHOLDER.findall(json.dumps(manifest))))
    need(not leftover, f"placeholders left unfilled: {', '.join(leftover)}")
    return problems


def _check_fields(manifest: dict[str, Any], need: Callable[[bool, str], None]) -> None:
    for field in ("manifestVersion", "version", "id", "developer", "name", "description", "icons", "accentColor"):
        need(field in manifest, f"{field} is missing (required)")
    need(manifest.get("manifestVersion") == MANIFEST_VERSION, f'manifestVersion must be "{MANIFEST_VERSION}"')
    need(_GUID.fullmatch(str(manifest.get("id", "")).lower()) is not None, "id must be a GUID")
    need(_SEMVER.fullmatch(str(manifest.get("version", ""))) is not None, "version must be MAJOR.MINOR.PATCH")
    need(_HEX_COLOR.fullmatch(str(manifest.get("accentColor", ""))) is not None, "accentColor must be #RRGGBB")


def _check_developer_and_icons(manifest: dict[str, Any], need: Callable[[bool, str], None]) -> None:
    developer = manifest.get("developer") or {}
    for field in ("websiteUrl", "privacyUrl", "termsOfUseUrl"):
        need(str(developer.get(field, "")).startswith("https://"), f"developer.{field} must be an https URL")
    icons = manifest.get("icons") or {}
    need(icons.get("color") == "color.png" and icons.get("outline") == "outline.png",
         "icons must be color.png and outline.png")


def _check_bot(manifest: dict[str, Any], need: Callable[[bool, str], None]) -> None:
    """One bot, the app's own, in every scope, each scope with a command menu Teams accepts."""
    bots = manifest.get("bots") or []
    need(len(bots) == 1, "there must be exactly one bot")
    for bot in bots[:1]:
        need(bot.get("botId") == manifest.get("id"), "bots[0].botId must be the app id")
        scopes = set(bot.get("scopes") or [])
        need(scopes == {"personal", "team", "groupChat"}, "the bot's scopes must be personal, team and groupChat")
        lists = bot.get("commandLists") or []
        need(len(lists) <= 3, "at most 3 commandLists")
        need({scope for entry in lists for scope in entry.get("scopes", [])} == scopes,
             "every scope of the bot needs a command list")
        for index, entry in enumerate(lists):
            _check_command_list(index, entry, need)


def _check_command_list(index: int, entry: dict[str, Any], need: Callable[[bool, str], None]) -> None:
    """A command menu Teams accepts (schema 1.30: up to 12 commands; a "prompt" command, a prompt starter, puts its
    prompt in the compose box instead of its title)."""
    commands = entry.get("commands") or []
    need(1 <= len(commands) <= 12, f"commandLists[{index}] must hold 1 to 12 commands")
    for command in commands:
        title = str(command.get("title", ""))
        need(1 <= len(title) <= 128, f'command "{title}": title must be 1 to 128 characters')
        need(1 <= len(str(command.get("description", ""))) <= 4000,
             f'command "{title}": description must be 1 to 4000 characters')
        kind = command.get("type", "basic")
        need(kind in ("basic", "prompt"), f'command "{title}": type must be basic or prompt')
        if kind == "prompt":
            need(1 <= len(str(command.get("prompt", ""))) <= 4000,
                 f'command "{title}": a prompt command needs its prompt (1 to 4000 characters)')


def _check_domains_and_sign_on(manifest: dict[str, Any], need: Callable[[bool, str], None]) -> None:
    """At most 16 valid domains; with Teams single sign-on, the API Teams asks a token for is the bot's own."""
    domains = manifest.get("validDomains") or []
    need(len(domains) <= 16, "at most 16 validDomains")
    sso = manifest.get("webApplicationInfo")
    if sso is not None:
        need(_GUID.fullmatch(str(sso.get("id", "")).lower()) is not None, "webApplicationInfo.id must be a GUID")
        need(sso.get("resource") == f"api://botid-{manifest.get('id')}",
             "webApplicationInfo.resource must be api://botid-<the bot's app id>")
        need(TOKEN_SERVICE_DOMAIN in domains, f"single sign-on needs {TOKEN_SERVICE_DOMAIN} in validDomains")


def _check_compose_extension(manifest: dict[str, Any], need: Callable[[bool, str], None]) -> None:
    """The message extension (incident search, link unfurling) is the bot's own, and its link domains are hosts."""
    extensions = manifest.get("composeExtensions") or []
    need(len(extensions) <= 1, "at most one composeExtensions entry")
    for extension in extensions[:1]:
        need(extension.get("botId") == manifest.get("id"), "composeExtensions[0].botId must be the app id")
        commands = extension.get("commands") or []
        need(1 <= len(commands) <= 10, "composeExtensions[0] must hold 1 to 10 commands")
        for handler in extension.get("messageHandlers") or []:
            for domain in (handler.get("value") or {}).get("domains") or []:
                need(isinstance(domain, str) and "/" not in domain and "://" not in domain,
                     f"messageHandlers domain {domain!r} must be a host name")


def _check_lengths(manifest: dict[str, Any], need: Callable[[bool, str], None]) -> None:
    limits = {("name", "short"): 30, ("name", "full"): 100, ("description", "short"): 80,
              ("description", "full"): 4000, ("developer", "name"): 32}
    for (section, field), limit in limits.items():
        value = str((manifest.get(section) or {}).get(field, ""))
        required = (section, field) != ("name", "full")
        need(bool(value) or not required, f"{section}.{field} is missing")
        need(len(value) <= limit, f"{section}.{field} is {len(value)} characters; the limit is {limit}")


def png_size(data: bytes) -> tuple[int, int] | None:
    """Width and height from a PNG's IHDR chunk, or None when ``data`` is not a PNG."""
    if len(data) < 24 or data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", data[16:24])
    return width, height


# ---- the package ------------------------------------------------------------------------------------------

def build(inputs: PackageInputs, out: Path = DEFAULT_OUT, source: Path = SOURCE) -> dict[str, Any]:
    """Write the package to ``out``; returns the manifest it holds. Raises PackageError with what to fix."""
    try:
        template = json.loads((source / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PackageError(f"Cannot read the manifest template {source / MANIFEST}: {exc}") from exc
    manifest = inputs.single_sign_on(render(template, inputs.placeholders()))
    problems = check_manifest(manifest)
    icons: dict[str, bytes] = {}
    for name, side in ICON_SIZES.items():
        try:
            icons[name] = (source / name).read_bytes()
        except OSError as exc:
            raise PackageError(f"Cannot read the icon {source / name}: {exc.strerror}") from exc
        size = png_size(icons[name])
        if size != (side, side):
            problems.append(f"{name} must be a {side}x{side} PNG" + (f", not {size[0]}x{size[1]}" if size else ""))
    if problems:
        raise PackageError("The manifest would not be valid:\n  - " + "\n  - ".join(problems))
    if out.is_dir():
        raise PackageError(f"--out {out} is a directory; give the zip's file name, e.g. {out / DEFAULT_OUT.name}.")
    files = {MANIFEST: (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode("utf-8"), **icons}
    partial = out.with_name(out.name + ".partial")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for name in PACKAGE_FILES:
                entry = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
                entry.compress_type = zipfile.ZIP_DEFLATED
                entry.external_attr = 0o644 << 16
                archive.writestr(entry, files[name])
        partial.replace(out)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise PackageError(f"Cannot write {out}: {exc.strerror or exc}") from exc
    return manifest


# ---- command line (python -m bot package) -----------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--app-id", required=True, metavar="GUID",
                        help="the bot's Microsoft App ID (MICROSOFT_APP_ID); also used as the Teams app id")
    parser.add_argument("--domain", required=True, metavar="HOST",
                        help="host name of the bot's messaging endpoint, e.g. sentinel-bot.azurewebsites.net")
    parser.add_argument("--version", default=DEFAULT_VERSION,
                        help="app version, MAJOR.MINOR.PATCH; raise it for every new upload "
                             f"(default {DEFAULT_VERSION})")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"the zip to write (default {DEFAULT_OUT})")
    parser.add_argument("--developer-name", default=DEFAULT_DEVELOPER_NAME,
                        help=f"publisher shown in Teams, up to 32 characters (default \"{DEFAULT_DEVELOPER_NAME}\")")
    parser.add_argument("--sso-app-id", default=None, metavar="GUID",
                        help="on-behalf-of mode (QUERY_IDENTITY=user): the client id of the app registration Teams "
                             "single sign-on issues tokens to (SSO_APP_ID); adds webApplicationInfo")
    parser.add_argument("--developer-url", default=DEFAULT_DEVELOPER_URL,
                        help="https URL of your page about the app; URL/privacy and URL/terms are linked as the "
                             f"privacy statement and terms of use (default {DEFAULT_DEVELOPER_URL}, a placeholder)")


def run(args: argparse.Namespace) -> int:
    """The package subcommand: build, then say what was built and where to upload it; 2 on bad input."""
    try:
        inputs = PackageInputs.checked(args.app_id, args.domain, args.version, args.developer_name,
                                       args.developer_url, getattr(args, "sso_app_id", None))
        build(inputs, args.out)
    except PackageError as exc:
        print(f"Cannot build the Teams app package. {exc}", file=sys.stderr)
        return 2
    print(f"Wrote {args.out}: manifest {MANIFEST_VERSION}, app {inputs.app_id}, version {inputs.version}, "
          f"domain {inputs.domain}" + (f", single sign-on through {inputs.sso_app_id}." if inputs.sso_app_id else "."))
    if inputs.developer_url == DEFAULT_DEVELOPER_URL:
        print(f"Note: the developer, privacy and terms links point at {DEFAULT_DEVELOPER_URL}, a placeholder; "
              "pass --developer-url with your own page before publishing to your organisation.", file=sys.stderr)
    print("Upload it in Teams (Apps > Manage your apps > Upload an app) or in the Teams admin center "
          "(Teams apps > Manage apps > Upload new app); see appPackage/README.md.")
    return 0
