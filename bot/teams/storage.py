"""Where conversation state lives: botbuilder ``Storage`` implementations and the factory that picks one.

- ``memory``: botbuilder's ``MemoryStorage``, for tests.
- ``sqlite``: :class:`SqliteStorage`, one local file; the embedded default, survives restarts.
- ``blob``: :class:`EscapedBlobStorage`, botbuilder-azure's ``BlobStorage`` (Azure Blob Storage) for several
  instances serving one bot.

All honour botbuilder's optimistic concurrency: ``read`` returns each item with its ``e_tag``; writing an
item back with that e_tag fails with :class:`EtagConflictError` (a ``KeyError``, like ``MemoryStorage``'s)
when someone else wrote it since; an e_tag of ``"*"``, or none, overwrites, and ``CREATE_ONLY`` (SQLite, blob)
writes only an item nobody wrote yet. SQLite and blob items must be
JSON objects of at most ``max_item_bytes`` (UTF-8 JSON); anything else fails with :class:`StateValueError`
before anything is written.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import sqlite3
import threading
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from azure.storage.blob.aio import BlobServiceClient
from botbuilder.azure import BlobStorage, BlobStorageSettings
from botbuilder.azure.blob_storage import convert_account_name_and_key_to_connection_string
from botbuilder.core import MemoryStorage, Storage

from bot.turns.sqlite import connect_wal, immediate

DEFAULT_MAX_ITEM_BYTES = 256 * 1024
STORAGE_KINDS = ("memory", "sqlite", "blob", "cosmos")
MAX_BLOB_NAME = 1024  # Azure's limit on a blob name, in characters
_SQL_BATCH = 500  # keys per statement, well under SQLite's limit on bound parameters
_BLOB_SAFE = re.compile(r"[A-Za-z0-9_-]")
_CONTAINER_NAME = re.compile(r"^(?!.*--)[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")


# An item's e_tag for a write that creates it only if nobody did first (else EtagConflictError): what a record
# shared by worker processes needs for its first write, which "*" (write whatever is there) cannot give.
CREATE_ONLY = "create-only"


class StateStorageError(Exception):
    """The state store failed; the message says what to check."""


class EtagConflictError(StateStorageError, KeyError):
    """The item changed since it was read. A ``KeyError`` like ``MemoryStorage``'s conflict error."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class StateValueError(StateStorageError, ValueError):
    """An item the store cannot hold: not a JSON object, or over the size cap."""


class EncodedItem(dict[str, Any]):
    """An item whose JSON (without its e_tag) the caller already made: stores that read ``text`` instead of
    serialising the item again; any other store sees the dict."""

    def __init__(self, value: Mapping[str, Any], text: str) -> None:
        super().__init__(value)
        self.text = text


def encode_item(key: str, value: Any, max_bytes: int) -> tuple[str | None, str]:
    """(e_tag, JSON text of the item without its e_tag), or StateValueError saying what is wrong."""
    if not isinstance(key, str) or not key:
        raise StateValueError(f"state keys must be non-empty strings, got {key!r}")
    if not isinstance(value, Mapping):
        raise StateValueError(f"state for key {key!r} must be a dict (a JSON object), got {type(value).__name__}")
    e_tag = value.get("e_tag")
    if e_tag == "":
        raise StateValueError(f"state for key {key!r} has an empty e_tag: use the e_tag read, '*', or none")
    try:
        text = value.text if isinstance(value, EncodedItem) else json.dumps(
            {k: v for k, v in value.items() if k != "e_tag"}, ensure_ascii=False, allow_nan=False,
            separators=(",", ":"))
    except (TypeError, ValueError) as error:
        raise StateValueError(f"state for key {key!r} is not JSON-serialisable ({error}); "
                              "store only dicts, lists, strings, numbers, booleans and None") from error
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise StateValueError(f"state for key {key!r} is {size} bytes of JSON, over the {max_bytes}-byte cap; "
                              "keep less history or fewer references per conversation")
    return e_tag, text


def _conflict(key: str, expected: Any, since: str) -> EtagConflictError:
    return EtagConflictError(f"e_tag conflict for key {key!r}: it was read at e_tag {expected!r} and {since}; "
                             "read it again and reapply the change")


def _batches(keys: Iterable[str]) -> Iterable[list[str]]:
    unique = list(dict.fromkeys(keys))
    for start in range(0, len(unique), _SQL_BATCH):
        yield unique[start:start + _SQL_BATCH]


class SqliteStorage(Storage):
    """State in one SQLite file (WAL mode), safe for concurrent turns and for several processes on one file.

    SQLite calls run in worker threads (``asyncio.to_thread``), one at a time per instance; each write is one
    transaction, so a write of several items applies all of them or, on a conflict, none.
    """

    def __init__(self, path: str | Path, *, max_item_bytes: int = DEFAULT_MAX_ITEM_BYTES) -> None:
        if max_item_bytes < 1:
            raise ValueError(f"max_item_bytes must be positive, got {max_item_bytes}")
        self.path = Path(path)
        self.max_item_bytes = max_item_bytes
        self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = None
        try:
            connection = connect_wal(self.path, synchronous="NORMAL")  # durable at every checkpoint; safe with WAL
            connection.execute("CREATE TABLE IF NOT EXISTS bot_state (key TEXT PRIMARY KEY, etag TEXT NOT NULL, "
                               "data TEXT NOT NULL, updated_at TEXT NOT NULL)")
        except sqlite3.Error as error:
            if connection is not None:
                connection.close()
            raise StateStorageError(f"cannot open the state database {self.path}: {error}; check the path in "
                                    "STATE_STORE=sqlite:///path and that the folder is writable") from error
        self._connection: sqlite3.Connection | None = connection
        self._lock = threading.Lock()

    async def read(self, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
        keys = list(keys or ())
        if not keys:
            return {}
        return await asyncio.to_thread(self._read, keys)

    async def write(self, changes: Mapping[str, Any]) -> None:
        if changes is None:
            raise StateValueError("changes are required when writing")
        # Serialised here, on the caller's thread, so the stored JSON is the value as it was at the call.
        rows = [(key, *encode_item(key, value, self.max_item_bytes)) for key, value in changes.items()]
        if rows:
            await asyncio.to_thread(self._write, rows)

    async def delete(self, keys: Iterable[str]) -> None:
        keys = list(keys or ())
        if keys:
            await asyncio.to_thread(self._delete, keys)

    async def close(self) -> None:
        await asyncio.to_thread(self._close)

    def _open(self) -> sqlite3.Connection:
        if self._connection is None:
            raise StateStorageError(f"the state database {self.path} is closed")
        return self._connection

    def _read(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        with self._lock:
            connection = self._open()
            for batch in _batches(keys):
                marks = ",".join("?" * len(batch))
                for key, etag, data in connection.execute(
                        f"SELECT key, etag, data FROM bot_state WHERE key IN ({marks})", batch):
                    found[key] = {**json.loads(data), "e_tag": etag}
        return found

    def _write(self, rows: list[tuple[str, str | None, str]]) -> None:
        updated_at = datetime.now(UTC).isoformat(timespec="milliseconds")
        with self._lock, immediate(self._open()) as connection:  # the write lock before the e_tag checks
            for key, expected, data in rows:
                if expected == CREATE_ONLY:
                    if connection.execute("SELECT 1 FROM bot_state WHERE key = ?", (key,)).fetchone():
                        raise _conflict(key, expected, "exists already")
                elif expected is not None and expected != "*":
                    stored = connection.execute("SELECT etag FROM bot_state WHERE key = ?", (key,)).fetchone()
                    if stored is None or stored[0] != expected:
                        raise _conflict(key, expected, "was deleted since" if stored is None
                                        else f"is now at e_tag {stored[0]!r}")
                connection.execute(
                    "INSERT INTO bot_state (key, etag, data, updated_at) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT(key) DO UPDATE SET etag = excluded.etag, data = excluded.data, "
                    "updated_at = excluded.updated_at",
                    (key, uuid.uuid4().hex, data, updated_at))

    def _delete(self, keys: list[str]) -> None:
        with self._lock:
            connection = self._open()
            for batch in _batches(keys):
                connection.execute(f"DELETE FROM bot_state WHERE key IN ({','.join('?' * len(batch))})", batch)

    def _close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None


def blob_name(key: str) -> str:
    """A safe, unique blob name for a state key.

    Teams keys hold ``/ : @ ; =`` and a trailing ``/`` (``msteams/conversations/19:x@thread.tacv2;messageid=1/``);
    slashes would make virtual folders and Azure advises against names ending in ``/`` or ``.``. So every
    character but ``A-Z a-z 0-9 _ -`` becomes ``~XX`` per UTF-8 byte (``~`` included, so distinct keys get
    distinct names). A name over Azure's 1,024 characters keeps a prefix and ends in ``~~`` + SHA-256 of
    the key (``~~`` never occurs in an escaped name).
    """
    escaped = "".join(char if _BLOB_SAFE.fullmatch(char) else "".join(f"~{byte:02X}" for byte in char.encode())
                      for char in key)
    if len(escaped) <= MAX_BLOB_NAME:
        return escaped
    digest = hashlib.sha256(key.encode()).hexdigest()
    return escaped[:MAX_BLOB_NAME - 2 - len(digest)] + "~~" + digest


def _status(error: Exception) -> int | None:
    """The HTTP status of an Azure SDK error (without importing azure.core, which sentinel owns)."""
    return getattr(error, "status_code", None)


class EscapedBlobStorage(BlobStorage):
    """botbuilder-azure's ``BlobStorage`` with safe blob names and the contract of the other stores.

    Over the base class: keys are escaped (:func:`blob_name`); items are checked like SQLite's (JSON objects,
    size cap); a stale e_tag raises :class:`EtagConflictError` instead of the SDK's 412 error; reading no
    keys returns ``{}``; a failed read raises instead of reporting the item as missing (the base class
    drops any HTTP error, which would silently reset a conversation); ``close()`` releases the HTTP session.
    """

    def __init__(self, settings: BlobStorageSettings, *, max_item_bytes: int = DEFAULT_MAX_ITEM_BYTES,
                 service: BlobServiceClient | None = None) -> None:
        if service is None:
            super().__init__(settings)
            service = BlobServiceClient.from_connection_string(
                settings.connection_string or convert_account_name_and_key_to_connection_string(settings))
        else:  # an account URL and the bot's identity: the base class can only build from a connection string
            self._BlobStorage__initialized = False
        self.max_item_bytes = max_item_bytes
        # The base class keeps only a container client of the service client it builds, and a container
        # client's close() leaves its parent's HTTP session open. So keep the service client here to close,
        # and give the base class its container client (no session is open yet at this point).
        self._service = service
        self._BlobStorage__container_client = self._service.get_container_client(settings.container_name)

    async def read(self, keys: Iterable[str]) -> dict[str, Any]:
        names = {blob_name(key): key for key in keys or ()}
        if not names:
            return {}
        found = await super().read(list(names))
        return {names[name]: item for name, item in found.items()}

    async def write(self, changes: Mapping[str, Any]) -> None:
        if changes is None:
            raise StateValueError("changes are required when writing")
        for key, value in changes.items():
            encode_item(key, value, self.max_item_bytes)
        for key, value in changes.items():  # one at a time, to say which key conflicted
            try:
                if isinstance(value, Mapping) and value.get("e_tag") == CREATE_ONLY:
                    await self._create(blob_name(key), {k: v for k, v in value.items() if k != "e_tag"})
                else:
                    await super().write({blob_name(key): value})
            except Exception as error:
                if _status(error) in (409, 412):  # 409: a create-only write of a blob that exists
                    raise _conflict(key, value.get("e_tag"), "has changed or been deleted since") from error
                raise

    async def delete(self, keys: Iterable[str]) -> None:
        await super().delete([blob_name(key) for key in keys or ()])

    async def close(self) -> None:
        await self._service.close()

    async def _create(self, name: str, value: Mapping[str, Any]) -> None:
        """Write a new blob, failing (409) when it exists: Azure's create-only upload."""
        await self._initialize()
        await self.container().get_blob_client(name).upload_blob(self._store_item_to_str(dict(value)), overwrite=False)

    def container(self) -> Any:
        """The state container's client (the watch poller takes its lease on a blob there)."""
        return self._BlobStorage__container_client

    async def _inner_read_blob(self, blob_client: Any) -> Any:
        try:
            return await super()._inner_read_blob(blob_client)
        except Exception as error:
            if _status(error) in (None, 404):
                raise
            raise StateStorageError(f"reading state blob {blob_client.blob_name!r} failed with HTTP "
                                    f"{_status(error)}: check the storage account, its network rules and "
                                    "the connection string") from error


def create_only_tag(storage: Storage) -> str:
    """The e_tag for a create-only write in ``storage``: ``CREATE_ONLY`` where this module's stores honour it, else
    "*" (botbuilder's MemoryStorage, one process, does not suspend between a read and a write)."""
    return CREATE_ONLY if isinstance(storage, SqliteStorage | EscapedBlobStorage) else "*"


def create_storage(kind: str, *, sqlite_path: str | Path | None = None, blob_connection_string: str | None = None,
                   blob_container: str = "bot-state", max_item_bytes: int = DEFAULT_MAX_ITEM_BYTES,
                   blob_account_url: str | None = None, credential: Any = None,
                   use_env_settings: bool = True) -> Storage:
    """The state store for STATE_STORE's kind: memory, sqlite (needs sqlite_path) or blob (an account URL and a token
    credential, or a local emulator's connection string). ``use_env_settings``: the Blob client reads proxy settings
    from the environment. Raises ValueError for a missing or invalid setting, NotImplementedError for cosmos."""
    if kind == "memory":
        return MemoryStorage()
    if kind == "sqlite":
        if not sqlite_path:
            raise ValueError("STATE_STORE=sqlite needs a database path, e.g. STATE_STORE=sqlite:///.data/state.db")
        return SqliteStorage(sqlite_path, max_item_bytes=max_item_bytes)
    if kind == "blob":
        if not blob_connection_string and not (blob_account_url and credential is not None):
            raise ValueError("STATE_STORE=blob needs STATE_BLOB_ACCOUNT_URL (reached as the bot's identity) or, for a "
                             "local emulator, STATE_BLOB_CONNECTION_STRING")
        if not _CONTAINER_NAME.match(blob_container or ""):
            raise ValueError(f"STATE_BLOB_CONTAINER={blob_container!r} is not a valid container name: 3-63 "
                             "lowercase letters, digits and single hyphens, starting and ending with a letter or digit")
        if not blob_connection_string:
            return EscapedBlobStorage(BlobStorageSettings(container_name=blob_container), max_item_bytes=max_item_bytes,
                                      service=BlobServiceClient(blob_account_url or "", credential=credential,
                                                                use_env_settings=use_env_settings))
        try:
            return EscapedBlobStorage(BlobStorageSettings(container_name=blob_container,
                                                          connection_string=blob_connection_string),
                                      max_item_bytes=max_item_bytes,
                                      service=BlobServiceClient.from_connection_string(
                                          blob_connection_string, use_env_settings=use_env_settings))
        except ValueError as error:  # the SDK's message never includes the secret; ours must not either
            raise ValueError(f"STATE_BLOB_CONNECTION_STRING is not a valid connection string: {error}") from None
    if kind == "cosmos":
        raise NotImplementedError("STATE_STORE=cosmos is not supported: use blob (several instances) or "
                                  "sqlite (one instance)")
    raise ValueError(f"unknown state store kind {kind!r}: use one of {', '.join(STORAGE_KINDS)}")
