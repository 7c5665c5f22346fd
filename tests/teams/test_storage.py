"""The state stores (bot/teams/storage.py): one contract for memory, SQLite and Azure Blob Storage.

Blob storage runs against Azurite, Microsoft's local Azure Storage emulator (npm package in tests/azurite,
installed by ./run tests), started once per module on a port the OS picks.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from azure.storage.blob.aio import BlobServiceClient
from botbuilder.core import ConversationState, MemoryStorage, Storage, TurnContext
from botbuilder.core.adapters import TestAdapter
from botbuilder.schema import Activity, ActivityTypes, ChannelAccount, ConversationAccount

from bot.teams.storage import (
    CREATE_ONLY,
    MAX_BLOB_NAME,
    EscapedBlobStorage,
    EtagConflictError,
    SqliteStorage,
    StateStorageError,
    StateValueError,
    blob_name,
    create_storage,
)
from tests.support.azurite import DEV_ACCOUNT, DEV_KEY

TEAMS_CHANNEL_KEY = "msteams/conversations/19:abc@thread.tacv2;messageid=1700000000000/"
# Keys as Teams and botbuilder make them, plus pairs that a careless escaping would merge.
TRICKY_KEYS = [
    TEAMS_CHANNEL_KEY,
    TEAMS_CHANNEL_KEY.rstrip("/"),
    "msteams/conversations/a:1x2y-3Z_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789-_Qw",
    "msteams/conversations/19:meeting_MjA5ZTk2YjYtNWE3@thread.v2",
    "msteams/users/29:1AbCdEf-GhIjKlMnOpQrStUvWxYz",
    "spaces and ?query#fragment&%20",
    "back\\slash",
    "back/slash",
    "ends with dots..",
    "Ünïcödé/日本語/🚨",
    "tilde/",
    "tilde~2F",
    "x" * 1500,
    "x" * 1500 + "y",
]
STATE = {
    "history": [{"role": "user", "content": "Qu'est-ce qui s'est passé ? 日本語 🚨 \"quoted\" \\ back"},
                {"role": "assistant", "content": "3 incidents [1] [2] [3]", "tools": ["list_incidents"]}],
    "references": {"1": {"kind": "incident", "id": "a1b2"}, "2": {"kind": "alert", "id": None}},
    "preferences": {"window": "24h", "severity": None, "verbose": False, "score": 3.5, "turns": 7},
    "empty": {"list": [], "dict": {}, "text": ""},
}


@pytest.fixture(params=["memory", "sqlite", "blob"])
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
async def open_store(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Callable[[], Storage]]:
    """Opens a store of ``kind``; every call opens another instance on the same data (a restart)."""
    shared_memory: dict[str, Any] = {}
    container = f"state-{uuid.uuid4().hex[:12]}"
    connection_string = request.getfixturevalue("azurite") if kind == "blob" else None
    opened: list[Storage] = []

    def open_one() -> Storage:
        if kind == "memory":
            store: Storage = MemoryStorage(shared_memory)
        else:
            store = create_storage(kind, sqlite_path=str(tmp_path / "data" / "state.db"),
                                   blob_connection_string=connection_string, blob_container=container)
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        if hasattr(store, "close"):
            await store.close()


@pytest.fixture
def storage(open_store: Callable[[], Storage]) -> Storage:
    return open_store()


def without_e_tag(item: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in item.items() if key != "e_tag"}


def assert_conflict(kind: str, error: BaseException | None) -> None:
    assert isinstance(error, KeyError), f"expected an e_tag conflict, got {error!r}"
    if kind != "memory":  # botbuilder's MemoryStorage raises a plain KeyError
        assert isinstance(error, EtagConflictError) and "e_tag conflict" in str(error), error


async def versioned(storage: Storage, key: str, value: dict[str, Any]) -> dict[str, Any]:
    """Writes ``value`` and returns it as read back with a real e_tag.

    Two rounds because MemoryStorage only starts versioning an item once it was stored with an e_tag.
    """
    await storage.write({key: {**value, "e_tag": "*"}})
    first = (await storage.read([key]))[key]
    await storage.write({key: dict(first)})
    item = (await storage.read([key]))[key]
    assert item["e_tag"] not in ("", "*", first["e_tag"])
    return dict(item)


# --- one contract, three stores ----------------------------------------------------------------------

async def test_round_trip_of_nested_unicode_state(kind: str, storage: Storage) -> None:
    original = {**STATE}
    await storage.write({TEAMS_CHANNEL_KEY: original})
    assert original == STATE and "e_tag" not in original  # the caller's dict is left alone

    item = (await storage.read([TEAMS_CHANNEL_KEY]))[TEAMS_CHANNEL_KEY]
    assert without_e_tag(item) == STATE
    if kind != "memory":
        assert isinstance(item["e_tag"], str) and item["e_tag"]

    await storage.delete([TEAMS_CHANNEL_KEY])
    assert await storage.read([TEAMS_CHANNEL_KEY]) == {}
    await storage.delete([TEAMS_CHANNEL_KEY, "never-written"])  # deleting what is gone is fine


async def test_reading_missing_keys(storage: Storage) -> None:
    assert await storage.read(["never-written"]) == {}
    assert await storage.read([]) == {}
    await storage.write({"present": {"n": 1}})
    found = await storage.read(["missing-1", "present", "missing-2"])
    assert list(found) == ["present"] and without_e_tag(found["present"]) == {"n": 1}


async def test_stale_e_tag_is_refused_and_star_or_none_overwrites(kind: str, storage: Storage) -> None:
    key = TEAMS_CHANNEL_KEY
    read_once = await versioned(storage, key, {"n": 1})
    await storage.write({key: {**read_once, "n": 2}})

    with pytest.raises(KeyError) as refused:
        await storage.write({key: {**read_once, "n": 99}})  # read_once's e_tag is stale now
    assert_conflict(kind, refused.value)
    assert (await storage.read([key]))[key]["n"] == 2

    await storage.write({key: {**read_once, "n": 3, "e_tag": "*"}})
    assert (await storage.read([key]))[key]["n"] == 3
    await storage.write({key: {"n": 4}})
    assert (await storage.read([key]))[key]["n"] == 4


async def test_two_concurrent_writers_of_one_version_one_wins(kind: str, storage: Storage) -> None:
    key = TEAMS_CHANNEL_KEY
    base = await versioned(storage, key, {"writer": None})
    outcomes = await asyncio.gather(storage.write({key: {**base, "writer": "a"}}),
                                    storage.write({key: {**base, "writer": "b"}}), return_exceptions=True)
    winners = [writer for writer, outcome in zip("ab", outcomes, strict=True) if outcome is None]
    losers = [outcome for outcome in outcomes if outcome is not None]
    assert len(winners) == 1 and len(losers) == 1, outcomes
    assert_conflict(kind, losers[0])
    assert (await storage.read([key]))[key]["writer"] == winners[0]


@pytest.mark.parametrize("kind", ["sqlite", "blob"])
async def test_a_create_only_write_lands_once(kind: str, storage: Storage) -> None:
    """CREATE_ONLY (the escalation brake's first write of an analyst's record): of writers racing to create an item,
    one lands and the others get an e_tag conflict; an item that exists is never overwritten by one."""
    key = "sentinel/escalations/0123abcd"
    outcomes = await asyncio.gather(*(storage.write({key: {"writer": n, "e_tag": CREATE_ONLY}}) for n in range(4)),
                                    return_exceptions=True)
    landed = [n for n, outcome in enumerate(outcomes) if outcome is None]
    assert len(landed) == 1, outcomes
    for outcome in outcomes:
        if outcome is not None:
            assert_conflict(kind, outcome)
    assert without_e_tag((await storage.read([key]))[key]) == {"writer": landed[0]}
    with pytest.raises(KeyError):
        await storage.write({key: {"writer": "late", "e_tag": CREATE_ONLY}})


async def test_concurrent_writers_of_different_keys_all_land(storage: Storage) -> None:
    keys = [f"msteams/conversations/a:{n}" for n in range(20)]
    await asyncio.gather(*(storage.write({key: {"n": n}}) for n, key in enumerate(keys)))
    found = await storage.read(keys)
    assert {key: item["n"] for key, item in found.items()} == {key: n for n, key in enumerate(keys)}


async def test_teams_keys_are_kept_apart(storage: Storage) -> None:
    await storage.write({key: {"key": key, "n": n} for n, key in enumerate(TRICKY_KEYS)})
    found = await storage.read(TRICKY_KEYS)
    assert sorted(found) == sorted(TRICKY_KEYS)
    assert all(item["key"] == key for key, item in found.items())

    await storage.delete([TRICKY_KEYS[0], TRICKY_KEYS[-1]])
    assert sorted(await storage.read(TRICKY_KEYS)) == sorted(TRICKY_KEYS[1:-1])


@pytest.mark.parametrize("kind", ["sqlite", "blob"])
async def test_a_new_instance_reads_what_the_old_one_wrote(kind: str, open_store: Callable[[], Storage]) -> None:
    before = open_store()
    await before.write({TEAMS_CHANNEL_KEY: STATE})
    written = (await before.read([TEAMS_CHANNEL_KEY]))[TEAMS_CHANNEL_KEY]
    await before.close()

    after = open_store()
    item = (await after.read([TEAMS_CHANNEL_KEY]))[TEAMS_CHANNEL_KEY]
    assert item == written  # same data, same e_tag: versions survive the restart
    await after.write({TEAMS_CHANNEL_KEY: {**item, "n": 1}})
    with pytest.raises(EtagConflictError):
        await after.write({TEAMS_CHANNEL_KEY: {**item, "n": 2}})


# --- SQLite ----------------------------------------------------------------------------------------------

async def test_sqlite_file_is_created_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "new" / "folder" / "state.db"
    storage = SqliteStorage(path)
    await storage.write({"k": {"n": 1}})
    await storage.close()
    with closing(sqlite3.connect(path)) as check:
        assert check.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        columns = [row[1] for row in check.execute("PRAGMA table_info(bot_state)")]
        assert columns == ["key", "etag", "data", "updated_at"]
        key, data, updated_at = check.execute("SELECT key, data, updated_at FROM bot_state").fetchone()
    assert (key, data) == ("k", '{"n":1}')  # the e_tag is a column, not part of the data
    assert abs((datetime.fromisoformat(updated_at) - datetime.now(UTC)).total_seconds()) < 60


def test_sqlite_says_when_it_cannot_open_the_file(tmp_path: Path) -> None:
    with pytest.raises(StateStorageError, match=f"cannot open the state database {tmp_path}.*STATE_STORE"):
        SqliteStorage(tmp_path)  # a folder, not a file


async def test_sqlite_caps_the_size_of_an_item(tmp_path: Path) -> None:
    storage = SqliteStorage(tmp_path / "state.db", max_item_bytes=1024)
    await storage.write({"fits": {"text": "é" * 400}})  # 800 bytes of UTF-8
    with pytest.raises(StateValueError, match=r"'too-big' is \d+ bytes of JSON, over the 1024-byte cap"):
        await storage.write({"too-big": {"text": "é" * 600}})
    assert list(await storage.read(["fits", "too-big"])) == ["fits"]
    await storage.close()

    default = SqliteStorage(tmp_path / "default.db")
    await default.write({"64kb": {"history": ["x" * 1000] * 64}})
    with pytest.raises(StateValueError, match="262144-byte cap"):
        await default.write({"300kb": {"history": ["x" * 1000] * 300}})
    await default.close()


@pytest.mark.parametrize("value, problem", [
    ({"when": datetime(2026, 1, 1)}, "not JSON-serialisable"),
    ({"ids": {1, 2}}, "not JSON-serialisable"),
    ({"score": float("nan")}, "not JSON-serialisable"),
    (["not", "a", "dict"], "must be a dict"),
    ({"e_tag": ""}, "empty e_tag"),
])
async def test_sqlite_refuses_what_json_cannot_hold(tmp_path: Path, value: Any, problem: str) -> None:
    storage = SqliteStorage(tmp_path / "state.db")
    with pytest.raises(StateValueError, match=problem) as refused:
        await storage.write({"good": {"n": 1}, "bad": value})
    assert "'bad'" in str(refused.value)
    assert await storage.read(["good", "bad"]) == {}  # checked before anything is written
    await storage.close()


async def test_sqlite_write_of_several_items_is_all_or_nothing(tmp_path: Path) -> None:
    storage = SqliteStorage(tmp_path / "state.db")
    stale = await versioned(storage, "a", {"n": 1})
    await storage.write({"a": {**stale, "n": 2}})
    with pytest.raises(EtagConflictError, match=r"'a'.*is now at e_tag"):
        await storage.write({"b": {"n": 1}, "a": {**stale, "n": 3}})
    assert list(await storage.read(["a", "b"])) == ["a"]

    await storage.delete(["a"])
    with pytest.raises(EtagConflictError, match="was deleted since"):
        await storage.write({"a": {**stale, "n": 4}})
    await storage.close()
    with pytest.raises(StateStorageError, match="closed"):
        await storage.read(["a"])


# --- Blob storage ------------------------------------------------------------------------------------

def test_blob_names_are_safe_and_distinct() -> None:
    names = [blob_name(key) for key in TRICKY_KEYS]
    assert len(set(names)) == len(TRICKY_KEYS)
    assert all(re.fullmatch(rf"[A-Za-z0-9_~-]{{1,{MAX_BLOB_NAME}}}", name) for name in names), names
    assert blob_name(TEAMS_CHANNEL_KEY) == ("msteams~2Fconversations~2F19~3Aabc~40thread~2Etacv2"
                                            "~3Bmessageid~3D1700000000000~2F")
    assert blob_name("a:1x2y-3Z_") == "a~3A1x2y-3Z_"
    assert len(blob_name("x" * 1500)) == MAX_BLOB_NAME and "~~" in blob_name("x" * 1500)


async def test_blob_container_holds_one_escaped_blob_per_key(azurite: str) -> None:
    storage = create_storage("blob", blob_connection_string=azurite, blob_container="escaped-names")
    await storage.write({key: {"key": key} for key in TRICKY_KEYS})
    async with BlobServiceClient.from_connection_string(azurite) as service:
        container = service.get_container_client("escaped-names")
        stored = sorted([blob.name async for blob in container.list_blobs()])
    await storage.close()
    assert stored == sorted(blob_name(key) for key in TRICKY_KEYS)


async def test_blob_read_failure_is_an_error_not_a_missing_item(azurite: str) -> None:
    """botbuilder-azure's BlobStorage reports any failed read as "not found", which would reset a conversation."""
    storage = create_storage("blob", blob_connection_string=azurite, blob_container="rotated-key")
    await storage.write({"k": {"n": 1}})
    # The account key is rotated under the running bot: later requests fail with 403.
    wrong_key = azurite.replace(DEV_KEY, "d3Jvbmcta2V5" * 4 + "d3Jvbmc=")
    rotated = BlobServiceClient.from_connection_string(wrong_key)
    storage._BlobStorage__container_client = rotated.get_container_client("rotated-key")
    with pytest.raises(StateStorageError, match="HTTP 403"):
        await storage.read(["k"])
    await rotated.close()
    await storage.close()


# --- factory -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind, settings, error, message", [
    ("sqlite", {}, ValueError, "STATE_STORE=sqlite needs a database path"),
    ("blob", {}, ValueError, "STATE_STORE=blob needs STATE_BLOB_ACCOUNT_URL"),
    ("blob", {"blob_connection_string": "AccountName=a;AccountKey=a2V5", "blob_container": "Bot_State"},
     ValueError, "STATE_BLOB_CONTAINER='Bot_State' is not a valid container name"),
    ("blob", {"blob_connection_string": "not a connection string secret=s3cr3t"}, ValueError,
     "STATE_BLOB_CONNECTION_STRING is not a valid connection string"),
    ("cosmos", {}, NotImplementedError, "use blob .* or sqlite"),
    ("redis", {}, ValueError, "unknown state store kind 'redis': use one of memory, sqlite, blob, cosmos"),
])
def test_factory_says_which_setting_is_missing(kind: str, settings: dict[str, str], error: type[Exception],
                                               message: str) -> None:
    with pytest.raises(error, match=message) as raised:
        create_storage(kind, **settings)
    assert "s3cr3t" not in str(raised.value)


async def test_factory_builds_each_kind(tmp_path: Path) -> None:
    assert type(create_storage("memory")) is MemoryStorage
    sqlite_store = create_storage("sqlite", sqlite_path=str(tmp_path / "state.db"))
    assert isinstance(sqlite_store, SqliteStorage)
    await sqlite_store.close()
    blob_store = create_storage("blob", blob_connection_string=f"AccountName={DEV_ACCOUNT};AccountKey={DEV_KEY}")
    assert isinstance(blob_store, EscapedBlobStorage)
    await blob_store.close()


# --- botbuilder's ConversationState over SQLite ------------------------------------------------------

def teams_turn(adapter: TestAdapter) -> TurnContext:
    return TurnContext(adapter, Activity(
        type=ActivityTypes.message, channel_id="msteams", text="hi", id=str(uuid.uuid4()),
        conversation=ConversationAccount(id="19:abc@thread.tacv2;messageid=1700000000000"),
        from_property=ChannelAccount(id="29:user"), recipient=ChannelAccount(id="28:bot")))


async def test_conversation_state_round_trips_over_sqlite(tmp_path: Path) -> None:
    path, adapter = tmp_path / "state.db", TestAdapter()

    storage = SqliteStorage(path)
    state = ConversationState(storage)
    conversation = state.create_property("conversation")
    turn = teams_turn(adapter)
    await state.load(turn)
    data = await conversation.get(turn, dict)
    assert data == {}
    data.update(history=[{"role": "user", "content": "incidents 24h ✓"}], references={"1": "inc-1"})
    await conversation.set(turn, data)
    await state.save_changes(turn)
    await storage.close()

    # A restart, then two turns in a row: each saves over the version it loaded.
    storage = SqliteStorage(path)
    state = ConversationState(storage)
    conversation = state.create_property("conversation")
    for n in range(2):
        turn = teams_turn(adapter)
        await state.load(turn)
        data = await conversation.get(turn, dict)
        assert data["references"] == {"1": "inc-1"} and len(data["history"]) == 1 + n
        data["history"].append({"role": "assistant", "content": f"answer {n}"})
        await conversation.set(turn, data)
        await state.save_changes(turn)

    # Two turns that loaded the same version: the second save is refused, not silently lost.
    first, second = teams_turn(adapter), teams_turn(adapter)
    await state.load(first)
    await state.load(second)
    for turn in (first, second):
        (await conversation.get(turn, dict))["preferences"] = {"window": "7d"}
    await state.save_changes(first, force=True)
    with pytest.raises(EtagConflictError):
        await state.save_changes(second, force=True)
    await storage.close()


async def test_sqlite_on_a_full_disk_fails_the_write_keeps_the_old_value_and_recovers(tmp_path: Path) -> None:
    """SQLITE_FULL (the database may not grow, as on a full disk): the write raises, nothing half-written stays,
    and writes work again once there is room. The Teams handler retries and reports such failures."""
    storage = SqliteStorage(tmp_path / "state.db")
    await storage.write({"conversation": {"history": ["first"]}})
    connection = storage._connection
    assert connection is not None
    pages = connection.execute("PRAGMA page_count").fetchone()[0]
    connection.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(sqlite3.OperationalError, match="full"):
        await storage.write({"conversation": {"history": ["first", "x" * 20_000]}})
    assert (await storage.read(["conversation"]))["conversation"]["history"] == ["first"]
    connection.execute("PRAGMA max_page_count = 1073741823")
    await storage.write({"conversation": {"history": ["first", "x" * 20_000]}})
    assert len((await storage.read(["conversation"]))["conversation"]["history"]) == 2
    await storage.close()
