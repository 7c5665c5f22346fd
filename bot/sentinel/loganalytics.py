"""Log Analytics backend: runs the KQL through ``azure.monitor.query.aio.LogsQueryClient``.

The client is built by the composition root (``create_logs_client``) and passed in, so tests can
point a real client at a fake HTTP endpoint. Failures become ``QueryError`` values that say what to
do; throttling, server errors and timeouts are marked retryable.

Retries: the SDK retries 500/503/504, and 429 only when the service sends Retry-After (the query is a
POST). A 429 without Retry-After is retried here with exponential backoff, a bounded number of times.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any

from azure.core.credentials_async import AsyncTokenCredential
from azure.core.exceptions import (
    ClientAuthenticationError,
    HttpResponseError,
    ServiceRequestError,
    ServiceResponseError,
)
from azure.monitor.query import LogsQueryPartialResult, LogsQueryResult
from azure.monitor.query.aio import LogsQueryClient

from bot.sentinel.client import RawTable
from bot.sentinel.models import QueryError
from bot.sentinel.queries import Query

log = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "https://api.loganalytics.io"
READER_ROLES = "Log Analytics Reader (or Microsoft Sentinel Reader)"
MAX_SERVICE_TEXT = 300


def create_logs_client(credential: AsyncTokenCredential, endpoint: str | None = None, **kwargs: Any) -> LogsQueryClient:
    """A LogsQueryClient with deliberate retry settings (the SDK default is 10 tries, up to 120 s apart)."""
    kwargs.setdefault("retry_total", 2)
    kwargs.setdefault("retry_backoff_factor", 0.8)
    kwargs.setdefault("retry_backoff_max", 8)
    return LogsQueryClient(credential, endpoint=endpoint or DEFAULT_ENDPOINT, **kwargs)


class LogAnalyticsBackend:
    source = "log_analytics"

    def __init__(
        self,
        client: LogsQueryClient,
        workspace_id: str,
        *,
        server_timeout_s: int = 60,
        deadline_grace_s: float = 15.0,
        throttle_retries: int = 2,
        backoff_s: float = 1.0,
        max_backoff_s: float = 10.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._client = client
        self._workspace_id = workspace_id
        self._server_timeout_s = server_timeout_s
        # The service stops at server_timeout; the grace covers the network and one SDK retry.
        self._deadline_s = server_timeout_s + deadline_grace_s
        self._throttle_retries = throttle_retries
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        self._sleep = sleep

    async def execute(self, query: Query, kql_text: str) -> RawTable | QueryError:
        for attempt in range(self._throttle_retries + 1):
            try:
                response = await asyncio.wait_for(
                    self._client.query_workspace(
                        self._workspace_id,
                        kql_text,
                        timespan=query.timespan,
                        server_timeout=self._server_timeout_s,
                    ),
                    timeout=self._deadline_s,
                )
            except TimeoutError:
                return _timeout_error(self._server_timeout_s)
            except HttpResponseError as err:
                error = _http_error(err, self._workspace_id, self._server_timeout_s)
                if error.code == "throttled" and attempt < self._throttle_retries:
                    delay = _retry_after(err) or self._backoff_s * (2**attempt) * (1 + random.random() / 4)
                    log.info("Log Analytics throttled the query; retrying in %.1f s", delay)
                    await self._sleep(min(delay, self._max_backoff_s))
                    continue
                return error
            except ClientAuthenticationError as err:
                return QueryError(
                    "credential_unavailable",
                    "The bot could not get an Azure token for Log Analytics. Locally, sign in with `az login`; "
                    "in Azure, give the app a managed identity (set AZURE_CLIENT_ID for a user-assigned one).",
                    retry_possible=False,
                    detail=_service_text(str(err)),
                )
            except (ServiceRequestError, ServiceResponseError) as err:
                return QueryError(
                    "unreachable",
                    "Log Analytics could not be reached. Try again in a moment; if it keeps failing, check the "
                    "network path to the Log Analytics endpoint (LOGS_ENDPOINT).",
                    retry_possible=True,
                    detail=_service_text(str(err)),
                )
            return _to_raw_table(response)
        raise AssertionError("unreachable: the loop always returns")  # pragma: no cover

    async def prepare(self) -> None:
        return None  # nothing to warm up; the first query signs in

    async def close(self) -> None:
        await self._client.close()


def _to_raw_table(response: LogsQueryResult | LogsQueryPartialResult) -> RawTable:
    warnings: tuple[str, ...] = ()
    if isinstance(response, LogsQueryPartialResult):
        tables = response.partial_data or []
        error = response.partial_error
        reason = _service_text(getattr(error, "message", "") or getattr(error, "code", "") or "unknown reason")
        warnings = (f"Log Analytics returned partial results ({reason}); some rows may be missing.",)
        log.warning("partial result from Log Analytics: %s", getattr(error, "code", "?"))
    else:
        tables = response.tables or []
    if not tables:
        return RawTable(rows=[], warnings=warnings)
    table = tables[0]
    columns = list(table.columns)
    rows = [dict(zip(columns, list(row), strict=False)) for row in table.rows]
    return RawTable(rows=rows, warnings=warnings)


def _http_error(err: HttpResponseError, workspace_id: str, server_timeout_s: int) -> QueryError:
    status = err.status_code
    detail = _service_text(_error_message(err))
    if status == 429:
        return QueryError(
            "throttled",
            "Log Analytics is throttling queries right now (too many at once). Wait a few seconds and ask again.",
            retry_possible=True, status=status, detail=detail,
        )
    if status == 504:
        return _timeout_error(server_timeout_s, status, detail)
    if status is not None and status >= 500:
        return QueryError(
            "server_error",
            f"Log Analytics had a temporary problem (HTTP {status}). Try again in a moment.",
            retry_possible=True, status=status, detail=detail,
        )
    if status == 401:
        return QueryError(
            "unauthorized",
            "Log Analytics did not accept the bot's credentials (401). Check the identity the bot runs as "
            "(managed identity or AZURE_* settings) and that its token is for the Log Analytics API.",
            retry_possible=False, status=status, detail=detail,
        )
    if status == 403:
        return QueryError(
            "forbidden",
            f"The bot's identity may not read this workspace (403). Grant it the {READER_ROLES} role "
            f"on workspace {workspace_id}.",
            retry_possible=False, status=status, detail=detail,
        )
    if status == 404:
        return QueryError(
            "workspace_not_found",
            f"Log Analytics has no workspace {workspace_id} (404). Set SENTINEL_WORKSPACE_ID to the Workspace ID "
            "(a GUID on the workspace's Overview page), not its name or resource id.",
            retry_possible=False, status=status, detail=detail,
        )
    if status == 400:
        return QueryError(
            "bad_query",
            "Log Analytics rejected the query as invalid. This is a problem in the bot, not in your question; "
            "please report it with the query shown under Data sources.",
            retry_possible=False, status=status, detail=detail,
        )
    return QueryError(
        "query_failed",
        f"The Log Analytics query failed (HTTP {status}).",
        retry_possible=False, status=status, detail=detail,
    )


def _timeout_error(server_timeout_s: int, status: int | None = None, detail: str = "") -> QueryError:
    return QueryError(
        "timeout",
        f"The query did not finish within {server_timeout_s} seconds. Try a shorter time window or a higher "
        "minimum severity.",
        retry_possible=True, status=status, detail=detail,
    )


def _retry_after(err: HttpResponseError) -> float | None:
    response = getattr(err, "response", None)
    value = response.headers.get("Retry-After") if response is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _error_message(err: HttpResponseError) -> str:
    model = getattr(err, "model", None) or getattr(err, "error", None)
    code = getattr(model, "code", "") or ""
    message = getattr(model, "message", "") or err.message or ""
    return f"{code}: {message}" if code else message


def _service_text(text: str) -> str:
    """Service error text, shortened and on one line, for logs and warnings."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= MAX_SERVICE_TEXT else flat[: MAX_SERVICE_TEXT - 3] + "..."
