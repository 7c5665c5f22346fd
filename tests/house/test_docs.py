"""The docs hold together: every relative link in the README, docs/, ARCHITECTURE.md and deploy/README.md points at
a file that exists (and, for a Markdown file, at a heading it has), and the README stays short enough to read."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", ROOT / "ARCHITECTURE.md", ROOT / "deploy" / "README.md",
                *(ROOT / "docs").glob("*.md")])
README_MAX_BYTES = 8_500

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def prose(text: str) -> str:
    """The text without code blocks and code spans, where brackets and parentheses are not links."""
    return _CODE.sub("", _FENCE.sub("", text))


def links(text: str) -> list[str]:
    return _LINK.findall(prose(text))


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered."""
    seen: dict[str, int] = {}
    found = set()
    for heading in _HEADING.findall(_FENCE.sub("", page.read_text(encoding="utf-8"))):
        slug = re.sub(r"[^\w\- ]", "", heading.replace("`", "").strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) and not target.startswith("//")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_at_files_and_headings_that_exist(page: Path) -> None:
    broken = []
    for target in filter(relative, links(page.read_text(encoding="utf-8"))):
        path, _, anchor = target.partition("#")
        file = (page.parent / unquote(path)).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor.lower() not in anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {file.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_readme_is_short() -> None:
    size = len((ROOT / "README.md").read_bytes())
    assert size < README_MAX_BYTES, f"README.md is {size} bytes, over {README_MAX_BYTES}: move the rest to docs/"


def test_the_link_reader_sees_links_and_skips_code() -> None:
    text = "See [a](docs/a.md#x) and <https://x.example>, not `[b](c.md)`.\n```\n[d](e.md)\n```\n![i](img.png \"t\")"
    assert links(text) == ["docs/a.md#x", "img.png"]
    assert not relative("https://learn.microsoft.com/azure") and not relative("mailto:a@b.example")
    assert relative("../README.md") and relative("#section")


def test_anchors_follow_githubs_rules(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("# Reading with each analyst's permissions (on-behalf-of, optional)\n## `STATE_STORE`\n"
                    "## Notes\n## Notes\n```\n# not a heading\n```\n", encoding="utf-8")
    assert anchors(page) == {"reading-with-each-analysts-permissions-on-behalf-of-optional", "state_store", "notes",
                             "notes-1"}
