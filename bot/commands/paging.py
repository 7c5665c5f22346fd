"""Lists a page at a time: "more" (or "next", "page 3", a card's Next button) shows the next rows of the last list.

A list query returns up to its limit; a card or the terminal shows a page of it (``PAGE_ROWS``, or the limit asked
for when that is smaller), and what it shows, what the footnote says was returned and what "more" offers agree: the
result shown is that page (``QueryResult.page``: its rows, its [n], "rows 26-50 of 97"). The next page is the same
query asked again for the rows up to that page's end (the limit's maximum at most) and cut to the page, so a list
pages as far as one query may return (100 incidents or alerts, 50 entities), and says so past that.

Where the list is kept: ``Listing``, in the conversation's state (the last list shown, by commands and by the model's
answers alike), and in each Next button's own data (a press pages the list on its card, however old).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.sentinel.models import QueryResult, count_label
from bot.sentinel.params import PAGE_ROWS
from bot.sentinel.queries import is_query, limit_of


@dataclass(frozen=True)
class Listing:
    """A list and where it is: its query and arguments (no limit), the first row of the page shown, the rows a page
    holds, and how many matched when it was shown."""

    tool: str
    arguments: dict[str, Any]
    offset: int
    rows: int
    total: int

    def to_dict(self) -> dict[str, Any]:
        return {"tool": self.tool, "arguments": self.arguments, "offset": self.offset, "rows": self.rows,
                "total": self.total}

    @classmethod
    def from_dict(cls, data: object) -> Listing | None:
        """A listing from state or a button's data; None for anything that is not one (an old or forged press)."""
        if not isinstance(data, dict) or not is_query(str(data.get("tool") or "")) or limit_of(data["tool"]) is None:
            return None
        arguments, offset, rows, total = (data.get(k) for k in ("arguments", "offset", "rows", "total"))
        if not isinstance(arguments, dict) or not all(isinstance(n, int) and n >= 0 for n in (offset, rows, total)):
            return None
        assert isinstance(offset, int) and isinstance(rows, int) and isinstance(total, int)
        return cls(data["tool"], dict(arguments), offset, max(1, min(rows, PAGE_ROWS)), total)

    @property
    def end(self) -> int:
        """The row after this page."""
        return self.offset + self.rows

    @property
    def pages(self) -> int:
        return max(1, -(-min(self.total, self.reach) // self.rows))

    @property
    def reach(self) -> int:
        """How far paging goes: the most rows one query of this list may return."""
        limit = limit_of(self.tool)
        return limit[1] if limit else self.total


def page_rows(tool: str, arguments: dict[str, Any]) -> int | None:
    """The rows a page of this query holds (the limit asked for, up to ``PAGE_ROWS``); None when it is no list."""
    limit = limit_of(tool)
    if limit is None:
        return None
    asked = arguments.get("limit")
    return min(asked if isinstance(asked, int) and asked > 0 else limit[0], PAGE_ROWS)


def listing_of(result: QueryResult) -> Listing | None:
    """The listing of a list's first page as shown (a command's, or the model's result on its card); None for a
    query that is no list."""
    meta = result.metadata
    rows = page_rows(meta.tool, meta.parameters)
    if rows is None:
        return None
    arguments = {k: v for k, v in meta.parameters.items() if k != "limit"}
    return Listing(meta.tool, arguments, meta.offset, rows, max(meta.total, meta.offset + len(result.records)))


def first_page(result: QueryResult) -> QueryResult:
    """What a list command shows: its first page (the whole result of a query that is no list)."""
    listing = listing_of(result)
    return result if listing is None else result.page(0, listing.rows)


def next_listing(listing: Listing, number: int | None) -> Listing | str:
    """The listing of page ``number`` (the next one when None), or the line saying why there is none."""
    wanted = listing.offset // listing.rows + 2 if number is None else number
    size = f"{count_label(listing.total, 'row')}, {listing.rows} a page"
    if wanted < 1:
        return f"Pages are numbered from 1: this list has {_pages(listing)} ({size})."
    if wanted <= listing.pages:
        return Listing(listing.tool, listing.arguments, (wanted - 1) * listing.rows, listing.rows, listing.total)
    if listing.total > listing.reach:
        return (f"{'The next page' if number is None else f'Page {wanted}'} is past the first {listing.reach} rows, "
                f"as far as a list pages ({listing.total} matched): narrow it (a shorter window, a higher severity, "
                "a filter) and page through that.")
    if number is None:
        return f'That was the last page: this list has {_pages(listing)} ({size}). Type "page 1" to start again.'
    return f"There is no page {wanted}: this list has {_pages(listing)} ({size})."


def arguments_for(listing: Listing) -> dict[str, Any]:
    """The query's arguments for a page: its rows up to the page's end."""
    return listing.arguments | {"limit": min(listing.end, listing.reach)}


def _pages(listing: Listing) -> str:
    return count_label(listing.pages, "page")


