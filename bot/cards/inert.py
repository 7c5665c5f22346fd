"""Text made inert for Teams: the one place that decides how a string someone else wrote (an incident's title, an
on-call roster row, an escalation reason, the model's answer echoing either) is kept from becoming a live link or
markup in a Teams message or card.

Teams renders message text and TextBlocks as markdown, and turns URLs into links by itself, so every link form is
broken, wherever it is and whatever surrounds it (``**``, ``_``, backticks, parentheses, the fact check's ⚠ mark
inside the link's text or URL):

- inline links and images, with or without a title: ``[t](u)``, ``[t](u "x")``, ``![a](u)`` -> ``[t] (u)``;
- reference links and their definitions: ``[t][1]`` -> ``[t] [1]``, a line ``[1]: u`` -> ``[1] : u``;
- autolinks and tags: ``<http://x>``, ``<a href>``, ``<at>``: the ``<`` becomes U+2039 (a single angle quote);
- every URL (a token with ``scheme://`` or ``www.``), bare, in parentheses or anywhere in a token: a zero-width
  space after each separator inside it (after ``https://``, each dot and slash), so no linkifier sees a host in
  it, while every character of it is still there to read.
"""

from __future__ import annotations

import re

ZERO_WIDTH_SPACE = "\u200b"
_TAG = re.compile(r"<(?=[A-Za-z/!?])")  # <at>, <a href>, </at>, <http://x>: shown, never parsed as a tag or autolink
_LINK_JOINS = re.compile(r"\](?=[(\[])")  # [t](u), ![a](u), [t][1], [t][]
_DEFINITION = re.compile(r"^( {0,3}\[[^\]\n]*\]):", re.MULTILINE)  # [1]: u
# A token holding a URL ("://" or "www."), whatever marks surround it: tokens are found first and then looked into,
# since one pattern ``\S*(?:://|www\.)\S*`` backtracks over every start of a long token (10,000 emoji: 26 s).
_TOKEN = re.compile(r"\S+")
_URL_MARK = re.compile(r"://|(?<![\w.-])www\.", re.IGNORECASE)
_SEPARATOR = r"@./\\:?&=_\-"
_BOUNDARY = re.compile(rf"(?<=[{_SEPARATOR}])(?=[^\s{_SEPARATOR}{ZERO_WIDTH_SPACE}])")  # once: idempotent


def unlink(text: str) -> str:
    """``text`` with every link form's syntax and every tag broken (see the module), URLs left as they are."""
    return _DEFINITION.sub(r"\1 :", _LINK_JOINS.sub("] ", _TAG.sub("\u2039", text)))


def unlinked_urls(text: str) -> str:
    """``text`` with a zero-width space after each separator inside its URLs, so Teams does not make one a link.
    Applying it again changes nothing."""
    return _TOKEN.sub(_broken, text) if _URL_MARK.search(text) else text


def holds_url(text: str) -> bool:
    """Whether some token of ``text`` holds a URL (``scheme://`` or ``www.``)."""
    return _URL_MARK.search(text) is not None


def is_url_token(text: str) -> bool:
    """Whether ``text`` is one token (no whitespace) holding a URL."""
    return _TOKEN.fullmatch(text) is not None and holds_url(text)


def inert(text: str) -> str:
    """``text`` with no link of any form left live (syntax broken, URLs unlinked); everything else as it is."""
    return unlinked_urls(unlink(text))


def _broken(token: re.Match[str]) -> str:
    found = token.group(0)
    return _BOUNDARY.sub(ZERO_WIDTH_SPACE, found) if _URL_MARK.search(found) else found
