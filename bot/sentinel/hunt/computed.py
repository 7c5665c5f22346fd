"""A hunt's computed columns (``extend``): text computed from one column of its table by a small closed set of
functions real hunts use, then named like any other column (conditions, group keys, aggregates, columns, sort).

Each is written ``[name, function, column, arguments...]``:

- ``extract``: ``[name, "extract", col, regex, group]``, the group (0 to 9) of the first match, "" when none
  (a regular expression bounded as a ``matches regex`` one is: ``conditions.check_regex``);
- ``split``: ``[name, "split", col, separator, index]``, the index-th part (0 to 63: Kusto does not document a
  negative index), "" past the parts;
- ``substring``: ``[name, "substring", col, start, length]`` (start 0 to 4096, length 1 to 4096);
- ``tolower``: ``[name, "tolower", col]``;
- ``json``: ``[name, "json", col, key, ...]``: the value at a path of 1 to 6 keys (names, or indexes 0 to 63)
  inside a dynamic column or JSON text, as text (``tostring``: "" when absent);
- ``url``: ``[name, "url", col, part]``: a part of a URL (``parse_url``): Scheme, Host, Port, Path, Fragment;
- ``eventdata``: ``[name, "eventdata", col, field]``: a ``<Data Name="field">`` value in Windows events' XML
  (``EventData``), which is ``extract`` of a fixed pattern around the field's name.

A computed column reads a column of the table (its own or a virtual one), never another computed column, so none
refers to itself; at most ``MAX_COMPUTED`` in a hunt. ``evaluate`` is the demo's Python for each (SQLite has none
of them); the KQL is built in ``hunt.kql``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from bot.sentinel.hunt.catalog import STRING_TYPES, Column, Computed
from bot.sentinel.hunt.conditions import MAX_VALUE_CHARS, check_regex, quoted
from bot.sentinel.params import InvalidParameter

MAX_COMPUTED = 8
MAX_PATH = 6  # keys in a json path
URL_PARTS = ("Scheme", "Host", "Port", "Path", "Fragment")
FUNCTIONS = ("extract", "split", "substring", "tolower", "json", "url", "eventdata")
# Names a hunt's own steps use (and a KQL ``project-away JoinKey*`` would drop): not a computed column's.
RESERVED = ("JoinKey", "JoinTime", "BaselineKey", "Session", "Series", "Anomaly", "Score", "Baseline",
            "TotalMatched", "Row", "Count")
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,39}$")
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_HELP = ('[name, fn, column, args...]: extract (regex, group), split (separator, index), substring (start, '
         'length), tolower, json (key, ...), url (Scheme|Host|Port|Path|Fragment), eventdata (Data Name); e.g. '
         '["Sub", "extract", "CommandLine", "/subcategory:(\\\\w+)", 1]')

Find = Callable[[object, str], Column]  # a table's column by name, or InvalidParameter listing them


def parse_computed(raw: object, find: Find, taken: Callable[[str], bool]) -> tuple[Column, ...]:
    """The hunt's computed columns, each checked; ``find`` resolves a table column, ``taken`` says whether a name
    is already a column of the table."""
    if raw is None or raw == "" or raw == []:
        return ()
    if not isinstance(raw, Sequence) or isinstance(raw, (str, bytes)):
        raise InvalidParameter("extend", f"a list of computed columns, {_HELP}; got {quoted(raw)}")
    if len(raw) > MAX_COMPUTED:
        raise InvalidParameter("extend", f"at most {MAX_COMPUTED} computed columns in one hunt; got {len(raw)}")
    out: dict[str, Column] = {}
    for item in raw:
        column = _one(item, find)
        lowered = column.name.lower()
        if lowered in out or taken(column.name) or _reserved(column.name):
            raise InvalidParameter("extend", f"{quoted(column.name)} is already a column (or a name the hunt "
                                             f"uses); name the computed column otherwise")
        out[lowered] = column
    return tuple(out.values())


def _reserved(name: str) -> bool:
    return any(name.lower().startswith(word.lower()) for word in RESERVED[:5]) or name.lower() in {
        w.lower() for w in RESERVED}


def _one(item: object, find: Find) -> Column:
    if isinstance(item, Mapping):  # {"as", "fn", "column", "args"} reads as the list form
        item = [item.get("as"), item.get("fn"), item.get("column"), *_listed(item.get("args"))]
    if not isinstance(item, Sequence) or isinstance(item, (str, bytes)) or len(item) < 3:
        raise InvalidParameter("extend", f"each computed column is {_HELP}; got {quoted(item)}")
    name, fn, of_name, *args = item
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidParameter("extend", f"a computed column's name is letters, digits and _ (at most 40); got "
                                         f"{quoted(name)}")
    fn = fn.strip().lower() if isinstance(fn, str) else fn
    if fn not in FUNCTIONS:
        raise InvalidParameter("extend", f"{quoted(fn)} is not a function a hunt computes with; {_HELP}")
    of = find(of_name, "extend")
    if of.computed is not None:  # never reached through ``find`` (table columns only); kept as the rule
        raise InvalidParameter("extend", "a computed column reads a column of the table, not another computed one")
    _check_source(fn, of, name)
    return Column(name, "string", computed=Computed(fn, of, _ARGUMENTS[fn](args)))


def _listed(raw: object) -> list[Any]:
    if raw is None:
        return []
    return list(raw) if isinstance(raw, Sequence) and not isinstance(raw, (str, bytes)) else [raw]


def _check_source(fn: str, of: Column, name: str) -> None:
    usable = STRING_TYPES | ({"dynamic"} if fn == "json" else set())
    if of.type not in usable:
        raise InvalidParameter("extend", f"{name}: {fn} reads text; {of.name} is {of.type}"
                                         + (" (json reads a dynamic column or JSON text)" if fn != "json" else ""))


def _count(args: list[Any], n: int, fn: str, example: str) -> None:
    if len(args) != n:
        raise InvalidParameter("extend", f"{fn} takes {n} argument{'s' if n != 1 else ''} after the column, e.g. "
                                         f"{example}; got {quoted(args)}")


def _whole(value: object, low: int, high: int, what: str) -> int:
    number = int(value) if isinstance(value, str) and re.fullmatch(r"-?\d{1,5}", value.strip()) else value
    if not isinstance(number, int) or isinstance(number, bool) or not low <= number <= high:
        raise InvalidParameter("extend", f"{what}: a whole number from {low} to {high}; got {quoted(value)}")
    return number


def _text(value: object, what: str, limit: int = MAX_VALUE_CHARS) -> str:
    if not isinstance(value, str) or not value or len(value) > limit:
        raise InvalidParameter("extend", f"{what}: text of 1 to {limit} characters; got {quoted(value)}")
    return value


def _extract(args: list[Any]) -> tuple[str | int, ...]:
    _count(args, 2, "extract", '["Sub", "extract", "CommandLine", "/subcategory:(\\\\w+)", 1]')
    pattern = _text(args[0], "extract's regular expression")
    check_regex(pattern, "extend")
    group = _whole(args[1], 0, 9, "extract's group")
    if group > re.compile(pattern).groups:
        raise InvalidParameter("extend", f"extract's group {group}: the expression has "
                                         f"{re.compile(pattern).groups} group(s)")
    return pattern, group


def _split(args: list[Any]) -> tuple[str | int, ...]:
    _count(args, 2, "split", '["Domain", "split", "UserPrincipalName", "@", 1]')
    return _text(args[0], "split's separator", 16), _whole(args[1], 0, 63, "split's index")


def _substring(args: list[Any]) -> tuple[str | int, ...]:
    _count(args, 2, "substring", '["Head", "substring", "CommandLine", 0, 40]')
    return _whole(args[0], 0, 4096, "substring's start"), _whole(args[1], 1, 4096, "substring's length")


def _tolower(args: list[Any]) -> tuple[str | int, ...]:
    _count(args, 0, "tolower", '["Lower", "tolower", "Account"]')
    return ()


def _json(args: list[Any]) -> tuple[str | int, ...]:
    if not 1 <= len(args) <= MAX_PATH:
        raise InvalidParameter("extend", f"json takes 1 to {MAX_PATH} keys after the column, e.g. "
                                         f"[\"Detail\", \"json\", \"Status\", \"additionalDetails\"]")
    out: list[str | int] = []
    for key in args:
        if isinstance(key, int) and not isinstance(key, bool):
            out.append(_whole(key, 0, 63, "json's index"))
        elif isinstance(key, str) and _KEY.match(key):
            out.append(key)
        else:
            raise InvalidParameter("extend", f"json's keys are names (letters, digits, _) or indexes 0 to 63; got "
                                             f"{quoted(key)}")
    return tuple(out)


def _url(args: list[Any]) -> tuple[str | int, ...]:
    _count(args, 1, "url", '["Domain", "url", "RequestURL", "Host"]')
    part = next((p for p in URL_PARTS if isinstance(args[0], str) and p.lower() == args[0].strip().lower()), None)
    if part is None:
        raise InvalidParameter("extend", f"url's part is one of {', '.join(URL_PARTS)}; got {quoted(args[0])}")
    return (part,)


def _eventdata(args: list[Any]) -> tuple[str | int, ...]:
    _count(args, 1, "eventdata", '["Service", "eventdata", "EventData", "ServiceName"]')
    if not isinstance(args[0], str) or not _KEY.match(args[0]):
        raise InvalidParameter("extend", f"eventdata's field is a Data Name (letters, digits, _); got "
                                         f"{quoted(args[0])}")
    return (args[0],)


_ARGUMENTS: dict[str, Callable[[list[Any]], tuple[str | int, ...]]] = {
    "extract": _extract, "split": _split, "substring": _substring, "tolower": _tolower, "json": _json, "url": _url,
    "eventdata": _eventdata}


def eventdata_pattern(field: str) -> str:
    """The regular expression ``eventdata`` extracts with (group 1: the value; the field is a plain name)."""
    return f'<Data Name="{field}">([^<]*)</Data>'


def shown(column: Column) -> list[str | int]:
    """A computed column in the tool's own argument shape."""
    assert column.computed is not None
    return [column.name, column.computed.fn, column.computed.of.name, *column.computed.args]


# --- the demo's Python ----------------------------------------------------------------------------------------------

@lru_cache(maxsize=64)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)  # checked when parsed (check_regex): no nested repeats, at most 256 characters


def evaluate(computed: Computed, value: Any) -> str:
    """The computed text of one row's value, as the KQL computes it ("" where the KQL's would be empty or null)."""
    text = "" if value is None else str(value)
    fn, args = computed.fn, computed.args
    if fn in ("extract", "eventdata"):
        pattern, group = (str(args[0]), int(args[1])) if fn == "extract" else (eventdata_pattern(str(args[0])), 1)
        match = _compiled(pattern).search(text)
        return (match.group(group) or "") if match else ""
    if fn == "split":
        parts, index = text.split(str(args[0])), int(args[1])
        return parts[index] if -len(parts) <= index < len(parts) else ""
    if fn == "substring":
        start, length = int(args[0]), int(args[1])
        return text[start:start + length]
    if fn == "tolower":
        return text.lower()
    if fn == "json":
        return _json_text(text, args)
    return _url_part(text, str(args[0]))


def _json_text(text: str, path: tuple[str | int, ...]) -> str:
    try:
        node: Any = json.loads(text)
    except (ValueError, RecursionError):
        return ""
    for key in path:
        if isinstance(key, int):
            node = node[key] if isinstance(node, list) and key < len(node) else None
        else:
            node = node.get(key) if isinstance(node, dict) else None
    return tostring(node)


def tostring(node: Any) -> str:
    """Kusto's ``tostring`` of a JSON value: text as is, null "", booleans lower case, objects compact JSON."""
    if node is None:
        return ""
    if isinstance(node, bool):
        return "true" if node else "false"
    if isinstance(node, str):
        return node
    if isinstance(node, float) and node.is_integer():
        return str(int(node))
    if isinstance(node, (dict, list)):
        return json.dumps(node, separators=(",", ":"), ensure_ascii=False)
    return str(node)


def _url_part(text: str, part: str) -> str:
    """``parse_url``'s part: "" unless the text is an absolute URL (a scheme and a host)."""
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError:
        return ""
    if not parts.scheme or not parts.netloc:
        return ""
    host = parts.netloc.rpartition("@")[2]
    host = host[1:host.index("]")] if host.startswith("[") and "]" in host else host.partition(":")[0]
    scheme = text.strip()[:len(parts.scheme)]  # as written (urlsplit lowers it)
    return {"Scheme": scheme, "Host": host, "Port": "" if port is None else str(port), "Path": parts.path,
            "Fragment": parts.fragment}[part]
