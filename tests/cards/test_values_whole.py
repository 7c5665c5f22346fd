"""What an analyst copies from a card is the record's value (issue 35, item 4): identifiers are never cut, and a
command line keeps its "*" unless the stars would be markup."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from bot import cards
from bot.cards.common import plain
from bot.sentinel.models import EntityRef
from tests.cards.test_cards import NOW, detail

SID = "S-1-5-21-3623811015-3361044348-30300820-1013"
OBJECT_ID = "0f6c2b1e-5d3a-4c1b-9f00-3e2d1c0b9a87"
LONG_URL = "https://login.contoso-secure.example.com/oauth2/v2.0/authorize?client_id=4f1c8e2a&redirect_uri=" + \
    "https%3A%2F%2Fapp.example%2Fcallback&state=" + "a" * 120


@pytest.mark.parametrize("line", ["del /q C:\\Temp\\*.tmp", "reg.exe add HKLM\\x /v y /d * /f",
                                  "powershell -c Get-ChildItem *.ps1 | % { $_.Name }", "dir *.txt *.log"])
def test_a_lone_star_in_a_command_line_is_kept(line: str) -> None:
    assert plain(line, 500) == line


@pytest.mark.parametrize("markup", ["**URGENT** isolate", "a*b*c", "* list item"])
def test_stars_that_would_be_markup_are_broken(markup: str) -> None:
    assert "*" not in plain(markup, 200)


def test_the_detail_cards_identifiers_are_whole() -> None:
    d = replace(detail(), entities=(EntityRef("account", "alice@contoso.com",
                                              (("Sid", SID), ("AadUserId", OBJECT_ID))),
                                    EntityRef("url", LONG_URL)))
    shown = json.dumps(cards.incident_detail(d, lambda kind, key: None, NOW, demo=True), ensure_ascii=False)
    assert SID in shown.replace("\u200b", "") and OBJECT_ID in shown.replace("\u200b", "")
    assert LONG_URL in shown, "a long URL is shown whole, as the record holds it"
    assert "…" not in shown.split("Entities")[-1]
