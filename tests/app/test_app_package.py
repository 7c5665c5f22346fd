"""The Teams app package: manifest against the official 1.30 schema, icons, zip contents, inputs, commands.

The PNG checks decode the icons here (signature, IHDR, IDAT inflate, the five row filters) instead of
trusting the generator: the outline rule (pure white or fully transparent) is about every pixel.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import struct
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft6Validator

from bot import package
from bot.__main__ import main
from bot.commands.parser import HELP_TEXT, parse

ROOT = Path(__file__).resolve().parents[2]
# The official manifest schema, kept in the repository (source: tests/schemas/README.md).
SCHEMA = ROOT / "tests" / "schemas" / "teams-manifest-1.30.schema.json"
APP_ID = "1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d"
DOMAIN = "sentinel-bot.azurewebsites.net"
SCOPES = ("personal", "team", "groupChat")
# Menu titles that need an argument to be a command; Teams inserts the title and the analyst adds the rest.
ARGUMENT_EXAMPLES = {"incident": "incident 42", "investigate": "investigate ws-fin-023", "escalate": "escalate [2]"}
COMMAND_NAMES = {"who is on call": "oncall", "escalate": "change"}  # a title whose parsed command is named otherwise
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def cli(*extra: str, out: Path) -> list[str]:
    return ["package", "--app-id", APP_ID, "--domain", DOMAIN, "--out", str(out), *extra]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("package") / "sentinel-assistant.zip"
    assert main(cli("--version", "1.2.3", out=out)) == 0
    return out


@pytest.fixture(scope="module")
def manifest(built: Path) -> dict[str, Any]:
    with zipfile.ZipFile(built) as archive:
        return json.loads(archive.read("manifest.json"))


@pytest.fixture(scope="module")
def validator() -> Draft6Validator:
    """The official schema with draft-06 semantics, so its `const` on manifestVersion is enforced.

    The schema declares draft-04, which has no `const`. Its one `\\p{L}` pattern (an Excel custom-function
    name) cannot be compiled by Python's `re`, so patterns `re` rejects are dropped from a copy: exactly
    that one, or this test wants a look.
    """
    assert SCHEMA.is_file(), f"the official manifest schema is missing: {SCHEMA}"
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    assert _drop_patterns_re_cannot_compile(schema) == ["^[\\p{L}][\\p{L}0-9._]*$"]
    return Draft6Validator(schema, format_checker=Draft6Validator.FORMAT_CHECKER)


def _drop_patterns_re_cannot_compile(node: Any) -> list[str]:
    dropped: list[str] = []
    if isinstance(node, dict):
        if isinstance(node.get("pattern"), str):
            try:
                re.compile(node["pattern"])
            except re.error:
                dropped.append(node.pop("pattern"))
        for value in node.values():
            dropped += _drop_patterns_re_cannot_compile(value)
    elif isinstance(node, list):
        for value in node:
            dropped += _drop_patterns_re_cannot_compile(value)
    return dropped


def _errors(validator: Draft6Validator, instance: dict[str, Any]) -> list[str]:
    return [f"{'/'.join(map(str, error.absolute_path)) or '(root)'}: {error.message}"
            for error in sorted(validator.iter_errors(instance), key=lambda error: list(map(str, error.path)))]


# ---- the manifest ---------------------------------------------------------------------------------------

def test_built_manifest_is_valid_against_the_official_1_30_schema(manifest: dict[str, Any],
                                                                  validator: Draft6Validator) -> None:
    assert manifest["manifestVersion"] == package.MANIFEST_VERSION == "1.30"
    assert manifest["$schema"] == "https://developer.microsoft.com/json-schemas/teams/v1.30/MicrosoftTeams.schema.json"
    assert validator.schema["properties"]["manifestVersion"]["const"] == "1.30"
    assert _errors(validator, manifest) == []


def test_a_wrong_manifest_version_is_caught(manifest: dict[str, Any], validator: Draft6Validator) -> None:
    older = copy.deepcopy(manifest)
    older["manifestVersion"] = "1.23"
    errors = _errors(validator, older)
    assert errors and all(error.startswith("manifestVersion:") for error in errors), errors


def test_the_schema_check_sees_other_mistakes_too(manifest: dict[str, Any], validator: Draft6Validator) -> None:
    broken = copy.deepcopy(manifest)
    broken["name"]["short"] = "S" * 31
    broken["bots"][0]["botId"] = "not-a-guid"
    broken["unknownField"] = True
    errors = _errors(validator, broken)
    assert len(errors) == 3, errors


def test_ids_version_and_domain_are_filled_in(manifest: dict[str, Any]) -> None:
    assert manifest["id"] == APP_ID
    assert manifest["bots"][0]["botId"] == APP_ID
    assert manifest["version"] == "1.2.3"
    assert manifest["validDomains"] == [DOMAIN]
    assert "{{" not in json.dumps(manifest)
    developer = manifest["developer"]
    assert developer["websiteUrl"] == package.DEFAULT_DEVELOPER_URL
    assert developer["privacyUrl"] == f"{package.DEFAULT_DEVELOPER_URL}/privacy"
    assert developer["termsOfUseUrl"] == f"{package.DEFAULT_DEVELOPER_URL}/terms"


def test_the_template_holds_placeholders_where_the_build_fills_in(manifest: dict[str, Any]) -> None:
    template = json.loads((ROOT / "appPackage" / "manifest.json").read_text(encoding="utf-8"))
    assert template["id"] == template["bots"][0]["botId"] == "{{MICROSOFT_APP_ID}}"
    assert template["version"] == "{{APP_VERSION}}"
    assert template["validDomains"] == ["{{BOT_DOMAIN}}"]
    # Everything else is the template as written.
    assert manifest["description"] == template["description"]
    assert manifest["bots"][0]["commandLists"] == template["bots"][0]["commandLists"]


def test_one_conversational_bot_in_every_scope_without_files(manifest: dict[str, Any]) -> None:
    (bot,) = manifest["bots"]
    assert sorted(bot["scopes"]) == sorted(SCOPES)
    assert bot["supportsFiles"] is False
    assert bot["isNotificationOnly"] is False
    assert sorted(scope for entry in bot["commandLists"] for scope in entry["scopes"]) == sorted(SCOPES)
    assert all(len(entry["scopes"]) == 1 for entry in bot["commandLists"])


def test_names_and_descriptions_fit_teams_limits(manifest: dict[str, Any]) -> None:
    assert len(manifest["name"]["short"]) <= 30 and len(manifest["name"]["full"]) <= 100
    assert len(manifest["description"]["short"]) <= 80 and len(manifest["description"]["full"]) <= 4000
    assert len(manifest["developer"]["name"]) <= 32
    for entry in manifest["bots"][0]["commandLists"]:
        assert 1 <= len(entry["commands"]) <= 12  # schema 1.30 (10 up to 1.23)
        for command in entry["commands"]:
            # Shorter than the schema's 128 and 4000: what the menu shows on one line, and under the title.
            assert len(command["title"]) <= 32 and len(command["description"]) <= 128, command


# ---- the commands in the menus are the bot's commands ------------------------------------------------------

def _menu_commands(manifest: dict[str, Any]) -> list[dict[str, str]]:
    return [command for entry in manifest["bots"][0]["commandLists"] for command in entry["commands"]]


def test_every_menu_command_is_one_the_bot_handles(manifest: dict[str, Any]) -> None:
    for command in _menu_commands(manifest):
        if command.get("type") == "prompt":
            continue  # a prompt starter: a question (below)
        title = command["title"]
        name = COMMAND_NAMES.get(title, title)
        parsed = parse(ARGUMENT_EXAMPLES.get(title, title))  # a CommandError would fail the test here
        assert parsed is not None and parsed.name == name, title
        for example in re.findall(r"Example: ([^(]+?)\s*(?:\(|$)", command["description"]):
            parsed = parse(example)
            assert parsed is not None and parsed.name == name, (title, example)


def test_every_scope_offers_prompt_starters_that_are_questions(manifest: dict[str, Any]) -> None:
    """Prompt starters (type "prompt"): Teams puts the prompt in the compose box, a plain-language question for the
    model, never text the command parser would take; and the menu says they need the model."""
    for entry in manifest["bots"][0]["commandLists"]:
        starters = [command for command in entry["commands"] if command.get("type") == "prompt"]
        assert [command["title"] for command in starters] == ["catch me up", "what came in overnight?"], \
            entry["scopes"]
        for command in starters:
            assert 20 <= len(command["prompt"]) <= 4000 and parse(command["prompt"]) is None, command
            assert "needs the language model" in command["description"]
            assert parse(command["title"]) is None, "a starter's title is no command either"


def test_every_scope_lists_the_commands_analysts_need(manifest: dict[str, Any]) -> None:
    help_commands = {line.split()[0] for line in HELP_TEXT.splitlines() if line.startswith("  ")}
    assert help_commands == {"help", "incidents", "incident", "summary", "alerts", "entity", "trend", "entities", "who",
                             "watch", "assign", "close", "reopen", "escalate", "prefer", "clear", "kql", "investigate",
                             "more"}
    # Teams shows at most 12 commands per scope: 10 of the bot's commands and two prompt starters. The incident
    # changes that are off by default (assign, close, reopen), entity (investigate reads more), entities (the summary
    # and investigate name an incident's main entities), prefer, clear and kql (for the few the access policy lets
    # hunt) are typed, from the help text, and so is more (a list's card has its Next button).
    typed = {"entity", "entities", "assign", "close", "reopen", "prefer", "clear", "kql", "more"}
    for entry in manifest["bots"][0]["commandLists"]:
        titles = [command["title"].split()[0] for command in entry["commands"] if command.get("type") != "prompt"]
        assert sorted(titles) == sorted(help_commands - typed), entry["scopes"]
    personal = [command["title"] for command in manifest["bots"][0]["commandLists"][0]["commands"]]
    assert {"investigate", "who is on call", "watch", "escalate", "summary"} <= set(personal)


# ---- icons -----------------------------------------------------------------------------------------------

def decode_png(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and rows of RGBA pixels of an 8-bit RGBA, non-interlaced PNG (what make_icons writes)."""
    assert data[:8] == PNG_SIGNATURE
    position, header, compressed = 8, None, b""
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        body = data[position + 8:position + 8 + length]
        (crc,) = struct.unpack(">I", data[position + 8 + length:position + 12 + length])
        assert zlib.crc32(kind + body) == crc, kind
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            compressed += body
        elif kind == b"IEND":
            break
        position += 12 + length
    assert header is not None
    width, height, depth, color_type, _, _, interlace = header
    assert (depth, color_type, interlace) == (8, 6, 0), "expected 8-bit RGBA, not interlaced"
    raw, stride, rows = zlib.decompress(compressed), width * 4, []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, row = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            left = row[i - 4] if i >= 4 else 0
            up, up_left = previous[i], previous[i - 4] if i >= 4 else 0
            row[i] = (row[i] + _predict(kind, left, up, up_left)) & 0xFF
        rows.append(bytes(row))
        previous = row
    return width, height, rows


def _predict(kind: int, left: int, up: int, up_left: int) -> int:
    if kind == 0:
        return 0
    if kind == 1:
        return left
    if kind == 2:
        return up
    if kind == 3:
        return (left + up) // 2
    assert kind == 4, f"unknown PNG filter {kind}"
    estimate = left + up - up_left
    distances = (abs(estimate - left), abs(estimate - up), abs(estimate - up_left))
    return (left, up, up_left)[distances.index(min(distances))]


def _pixels(rows: list[bytes]) -> list[tuple[int, ...]]:
    return [tuple(row[i:i + 4]) for row in rows for i in range(0, len(row), 4)]


def _icon(built: Path, name: str) -> bytes:
    with zipfile.ZipFile(built) as archive:
        data = archive.read(name)
    assert data == (ROOT / "appPackage" / name).read_bytes()
    return data


@pytest.mark.parametrize("name, side", [("color.png", 192), ("outline.png", 32)])
def test_icons_have_teams_sizes(built: Path, name: str, side: int) -> None:
    data = _icon(built, name)
    assert data[12:16] == b"IHDR" and struct.unpack(">II", data[16:24]) == (side, side)
    width, height, rows = decode_png(data)
    assert (width, height, len(rows)) == (side, side, side)


def test_outline_icon_is_white_on_transparent(built: Path) -> None:
    _, _, rows = decode_png(_icon(built, "outline.png"))
    pixels = _pixels(rows)
    assert {pixel for pixel in pixels if pixel[3] != 0} == {(255, 255, 255, 255)}
    assert {pixel[3] for pixel in pixels} == {0, 255}
    white = sum(1 for pixel in pixels if pixel[3] == 255)
    assert 0.15 * len(pixels) < white < 0.6 * len(pixels), "an outline, neither empty nor a filled square"
    assert all(pixel[3] == 0 for pixel in (pixels[0], pixels[31], pixels[-32], pixels[-1])), "transparent corners"


def test_color_icon_is_full_bleed_in_the_accent_colour(built: Path, manifest: dict[str, Any]) -> None:
    _, _, rows = decode_png(_icon(built, "color.png"))
    pixels = _pixels(rows)
    assert all(pixel[3] == 255 for pixel in pixels), "Teams masks the corners itself: the square is opaque"
    accent = tuple(bytes.fromhex(manifest["accentColor"][1:])) + (255,)
    assert pixels[0] == pixels[-1] == accent
    assert (255, 255, 255, 255) in set(pixels), "the white shield"
    assert len(set(pixels)) > 20, "anti-aliased edges, so the decoder undid the filters"


# ---- the zip and the build -------------------------------------------------------------------------------

def test_zip_holds_exactly_the_manifest_and_the_two_icons_at_its_root(built: Path) -> None:
    with zipfile.ZipFile(built) as archive:
        assert sorted(archive.namelist()) == ["color.png", "manifest.json", "outline.png"]
        assert archive.testzip() is None


def test_the_same_inputs_build_the_same_bytes(tmp_path: Path) -> None:
    inputs = package.PackageInputs.checked(APP_ID, DOMAIN)
    package.build(inputs, tmp_path / "a.zip")
    package.build(inputs, tmp_path / "b.zip")
    assert (tmp_path / "a.zip").read_bytes() == (tmp_path / "b.zip").read_bytes()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.zip", "b.zip"], "no partial file left"


def test_developer_details_come_from_the_build_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "app.zip"
    assert main(cli("--developer-name", "Contoso SOC", "--developer-url", "https://soc.contoso.com/bot/",
                    out=out)) == 0
    with zipfile.ZipFile(out) as archive:
        developer = json.loads(archive.read("manifest.json"))["developer"]
    assert developer == {"name": "Contoso SOC", "websiteUrl": "https://soc.contoso.com/bot",
                         "privacyUrl": "https://soc.contoso.com/bot/privacy",
                         "termsOfUseUrl": "https://soc.contoso.com/bot/terms"}
    captured = capsys.readouterr()
    assert f"Wrote {out}" in captured.out and "placeholder" not in captured.err


def test_the_default_developer_url_is_called_a_placeholder(built: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(cli(out=tmp_path / "app.zip")) == 0
    assert "https://example.com, a placeholder" in capsys.readouterr().err


@pytest.mark.parametrize("option, value, expected", [
    ("--app-id", "not-a-guid", "is not a GUID"),
    ("--app-id", "{1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d}", "is not a GUID"),
    ("--app-id", "00000000-0000-0000-0000-000000000000", "all-zero GUID"),
    ("--domain", "https://bot.example.com/api/messages", 'without scheme, port or path: e.g. "bot.example.com"'),
    ("--domain", "bot.example.com:443", "without scheme, port or path"),
    ("--domain", "localhost", "not a host name"),
    ("--domain", "bot_1.example.com", "not a host name"),
    ("--domain", "*.example.com", "not a host name"),
    ("--domain", "-bot.example.com", "not a host name"),
    ("--domain", "10.0.0.4", "is an IP address"),
    ("--version", "1.0", "is not MAJOR.MINOR.PATCH"),
    ("--version", "v1.0.0", "is not MAJOR.MINOR.PATCH"),
    ("--version", "1.02.0", "is not MAJOR.MINOR.PATCH"),
    ("--developer-url", "http://example.com", "must be an https URL"),
    ("--developer-name", "A" * 33, "1 to 32 characters"),
])
def test_bad_inputs_are_refused_with_what_to_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 option: str, value: str, expected: str) -> None:
    out = tmp_path / "app.zip"
    assert main([*cli(out=out), f"{option}={value}"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("Cannot build the Teams app package.") and expected in error, error
    assert "Traceback" not in error
    assert not out.exists()


@pytest.mark.slow
def test_the_command_line_refuses_bad_input_without_a_traceback(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "bot", *cli(out=tmp_path / "app.zip"), "--app-id", "42"],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "is not a GUID" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "app.zip").exists()


def test_the_build_refuses_an_icon_of_the_wrong_size(tmp_path: Path) -> None:
    source = tmp_path / "appPackage"
    shutil.copytree(ROOT / "appPackage", source)
    shutil.copy(source / "color.png", source / "outline.png")
    with pytest.raises(package.PackageError, match=re.escape("outline.png must be a 32x32 PNG, not 192x192")):
        package.build(package.PackageInputs.checked(APP_ID, DOMAIN), tmp_path / "app.zip", source)


def test_the_build_time_check_names_what_is_wrong(manifest: dict[str, Any]) -> None:
    assert package.check_manifest(manifest) == []
    broken = copy.deepcopy(manifest)
    broken["manifestVersion"] = "1.22"
    broken["name"]["short"] = "S" * 31
    broken["bots"][0]["commandLists"][0]["commands"] *= 2
    broken["bots"][0]["commandLists"][1]["commands"][0]["title"] = "t" * 129
    broken["bots"][0]["commandLists"][2]["commands"][-2].pop("prompt")
    broken["validDomains"] = ["{{BOT_DOMAIN}}"]
    del broken["accentColor"]
    problems = "\n".join(package.check_manifest(broken))
    for expected in ('manifestVersion must be "1.30"', "name.short is 31 characters; the limit is 30",
                     "commandLists[0] must hold 1 to 12 commands", "title must be 1 to 128 characters",
                     'command "what came in overnight?": a prompt command needs its prompt',
                     "placeholders left unfilled: BOT_DOMAIN", "accentColor is missing"):
        assert expected in problems


SSO_APP_ID = "7d6c5b4a-3f2e-4d1c-9b8a-7f6e5d4c3b2a"


def test_single_sign_on_adds_web_application_info_and_stays_valid(tmp_path: Path, validator: Draft6Validator,
                                                                   manifest: dict[str, Any]) -> None:
    out = tmp_path / "sso.zip"
    assert main(cli("--sso-app-id", SSO_APP_ID.upper(), out=out)) == 0
    with zipfile.ZipFile(out) as archive:
        sso = json.loads(archive.read("manifest.json"))
    assert _errors(validator, sso) == []
    assert sso["webApplicationInfo"] == {"id": SSO_APP_ID, "resource": f"api://botid-{APP_ID}"}
    assert sso["validDomains"] == [DOMAIN, package.TOKEN_SERVICE_DOMAIN], "the sign-in card's fallback page"
    assert "webApplicationInfo" not in manifest, "without --sso-app-id the package is unchanged"
    wrong = copy.deepcopy(sso)
    wrong["webApplicationInfo"]["resource"] = "api://botid-00000000-1111-2222-3333-444444444444"
    assert package.check_manifest(wrong) == ["webApplicationInfo.resource must be api://botid-<the bot's app id>"]


def test_a_bad_sso_app_id_is_refused_naming_its_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(cli("--sso-app-id", "my-sso-app", out=tmp_path / "x.zip")) == 2
    assert '--sso-app-id "my-sso-app" is not a GUID' in capsys.readouterr().err


def test_the_message_extension_searches_and_unfurls_the_portal_links_the_bot_reads(manifest: dict[str, Any],
                                                                                 validator: Draft6Validator) -> None:
    from bot.teams.extension import COMMAND_ID
    from bot.teams.links import PORTAL_DOMAINS

    [extension] = manifest["composeExtensions"]
    assert extension["botId"] == manifest["id"] and extension["composeExtensionType"] == "botBased"
    [command] = extension["commands"]
    assert command["id"] == COMMAND_ID and command["type"] == "query" and command["initialRun"] is True
    assert set(command["context"]) == {"compose", "commandBox"}
    [handler] = extension["messageHandlers"]
    assert handler["type"] == "link" and tuple(handler["value"]["domains"]) == PORTAL_DOMAINS
    broken = copy.deepcopy(manifest)
    broken["composeExtensions"][0]["commands"][0]["type"] = "search"
    assert list(validator.iter_errors(broken)), "the schema checks the extension too"
    broken = copy.deepcopy(manifest)
    broken["composeExtensions"][0]["botId"] = "00000000-1111-2222-3333-444444444445"
    assert "composeExtensions[0].botId must be the app id" in package.check_manifest(broken)
