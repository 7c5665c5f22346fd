"""The yardstick of issue 34 (``tests/data/hunt_yardstick.json``): 40 published Sentinel analytic rules over the
hunt's tables, each classified as expressed fully, partly or not by the hunt structure, before and after; and a
held-out sample of published hunting queries. Every full one's hunt arguments build KQL that Microsoft's Kusto parser
accepts, and each runs on the demo."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from pathlib import Path
from sqlite3 import Connection

from bot.demo.backend import DemoBackend
from bot.sentinel import queries
from bot.sentinel.hunt import parse_hunt
from bot.sentinel.hunt import sql as hunt_sql
from tests.support import kusto

YARDSTICK = json.loads((Path(__file__).resolve().parents[1] / "data" / "hunt_yardstick.json").read_text("utf-8"))
RULES = YARDSTICK["rules"]
HELD_OUT = YARDSTICK["hunting_queries_heldout"]["queries"]
# The full ones: the yardstick's rules and the held-out hunting queries alike parse and run.
FULL = [rule for rule in RULES if rule["after"] == "full"] + [q for q in HELD_OUT if q["now"] == "full"]


def test_the_yardstick_is_forty_published_rules_with_their_commits() -> None:
    assert len(RULES) >= 40 and len({r["path"] for r in RULES}) == len(RULES)
    for rule in RULES:
        assert rule["path"].startswith(("Detections/", "Solutions/")) and len(rule["commit"]) == 40, rule
        assert {rule["before"], rule["after"]} <= {"full", "partly", "not"} and rule["note"]
        assert ("arguments" in rule) == (rule["after"] == "full"), rule["path"]
    before, after = Counter(r["before"] for r in RULES), Counter(r["after"] for r in RULES)
    assert after["full"] > before["full"] and after["not"] < before["not"], (before, after)


def test_the_held_out_hunting_queries_are_published_ones_with_their_commits() -> None:
    assert len(HELD_OUT) >= 8 and len({q["path"] for q in HELD_OUT}) == len(HELD_OUT)
    for query in HELD_OUT:
        assert query["path"].startswith("Hunting Queries/") and len(query["commit"]) == 40, query
        assert query["now"] in {"full", "partly", "not"} and query["note"]
        assert ("arguments" in query) == (query["now"] == "full"), query["path"]


def test_every_full_rules_hunt_parses_with_microsofts_parser() -> None:
    texts = [queries.kql_of(queries.make_query("hunt", rule["arguments"])) for rule in FULL]
    for rule, result, text in zip(FULL, kusto.check(texts), texts, strict=True):
        assert result["ok"], (rule["path"], result["errors"], text)


def runs_on_the_demo(demo_backend: DemoBackend, entries: list[dict]) -> None:
    """Each entry's hunt arguments run on the demo, every row holding the hunt's output columns in order."""
    def run(conn: Connection, now: datetime) -> int:
        for entry in entries:
            hunt = parse_hunt(entry["arguments"])
            rows = hunt_sql.run(hunt, conn, now)
            assert all(list(row["Row"]) == [name for name, _ in hunt.output] for row in rows), entry["path"]
        return len(entries)

    assert demo_backend.with_database(run) == len(entries)


def test_every_full_rules_hunt_runs_on_the_demo(demo_backend: DemoBackend) -> None:
    runs_on_the_demo(demo_backend, FULL)
