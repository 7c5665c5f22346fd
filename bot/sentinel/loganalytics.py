"""Log Analytics backend: runs the KQL through ``azure.monitor.query.aio.LogsQueryClient``.

The client is built by the composition root (``create_logs_client``) and passed in, so tests can
point a real client at a fake HTTP endpoint. Failures become ``QueryError`` values that say what
happened and what to do; a response the bot cannot read is an error, never an empty result
(``responses.py`` reads the shapes).

Service limits: every query waits for its slot in its identity's lane of the ``QueryScheduler``
(``scheduler.py``: at most so many at once and so many per window, the most urgent first; the identity is the
bot's, or with on-behalf-of the turn's analyst's). Retries: the SDK retries 500/502/503/504 and connection errors
a bounded number of times. Throttling (429) is handled here, not in the SDK: the identity's lane is held for the
service's Retry-After (or, without one, an exponential backoff with jitter, bounded), and the query tries again a
bounded number of times; a Retry-After longer than the backoff's bound is reported with the service's own wait
instead of holding the analyst's turn, and when the tries run out the error says so.

Each query gets its own ``server_timeout`` (the service's ``Prefer: wait``): short windows get less
time than long ones, never more than the configured ceiling (the service allows at most 600 s).
Each query carries an id (the ``x-ms-client-request-id`` header), logged with every problem.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from azure.core.credentials_async import AsyncTokenCredential
from azure.core.exceptions import (
    ClientAuthenticationError,
    DecodeError,
    HttpResponseError,
    ServiceRequestError,
    ServiceResponseError,
)
from azure.core.pipeline.policies import AsyncRetryPolicy
from azure.monitor.query import LogsQueryPartialResult, LogsQueryResult
from azure.monitor.query.aio import LogsQueryClient

from bot.sentinel.client import RawTable
from bot.sentinel.identity import TokenProblem, UserSessions, current_analyst, token_problem
from bot.sentinel.models import QueryError
from bot.sentinel.queries import Query
from bot.sentinel.responses import TableRead, UnreadableResponse, partial_detail, read_table
from bot.sentinel.scheduler import Busy, QueryScheduler

log = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "https://api.loganalytics.io"
READER_ROLES = "Log Analytics Reader (or Microsoft Sentinel Reader)"
MAX_SERVICE_TEXT = 300
SERVICE_MAX_TIMEOUT_S = 600  # Prefer: wait is capped at 10 minutes by the service
MIN_TIMEOUT_S = 10
SHORT_WINDOW = timedelta(days=1)
# The SDK's model building fails with these on bodies that are not the documented shape.
_SHAPE_ERRORS = (TypeError, KeyError, IndexError, AttributeError, ValueError)


class _QueryRetryPolicy(AsyncRetryPolicy):
    """The SDK's retry policy, except for 429: the backend decides how long a throttled query may wait."""

    def is_retry(self, settings: Any, response: Any) -> bool:
        if response.http_response.status_code == 429:
            return False
        return bool(super().is_retry(settings, response))


def create_logs_client(credential: AsyncTokenCredential, endpoint: str | None = None, **kwargs: Any) -> LogsQueryClient:
    """A LogsQueryClient with deliberate retry settings (the SDK default is 10 tries, up to 120 s apart)."""
    retry = {"retry_total": 2, "retry_backoff_factor": 0.8, "retry_backoff_max": 8}
    retry |= {key: kwargs.pop(key) for key in list(kwargs) if key in retry}
    kwargs.setdefault("retry_policy", _QueryRetryPolicy(**retry))
    return LogsQueryClient(credential, endpoint=endpoint or DEFAULT_ENDPOINT, **kwargs)


def server_timeout_for(query: Query, ceiling_s: int) -> int:
    """The query's own time limit: half the ceiling (at least 10 s) for windows up to a day, which scan little;
    the whole ceiling for longer ones."""
    ceiling = max(1, min(ceiling_s, SERVICE_MAX_TIMEOUT_S))
    if query.timespan > SHORT_WINDOW:
        return ceiling
    return max(min(ceiling, MIN_TIMEOUT_S), math.ceil(ceiling / 2))


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
        clock: Callable[[], float] = time.monotonic,
        users: UserSessions | None = None,
        scheduler: QueryScheduler | None = None,
    ) -> None:
        self._client = client
        # On-behalf-of mode: each analyst's queries go through their own client, with their own token.
        self._users = users
        self._workspace_id = workspace_id
        self._server_timeout_s = server_timeout_s  # the ceiling; each query gets server_timeout_for(...)
        # The service stops at server_timeout; the grace covers the network and one SDK retry.
        self._grace_s = deadline_grace_s
        self._throttle_retries = throttle_retries
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        # One per process, shared by every identity's lane (sleep and clock: tests' virtual time).
        self._scheduler = scheduler or QueryScheduler(clock=clock, sleep=sleep)
        self._clock = clock

    async def execute(self, query: Query, kql_text: str) -> RawTable | QueryError:
        client = await self._client_for_turn()
        if isinstance(client, QueryError):
            return client
        query_id = str(uuid.uuid4())
        timeout_s = server_timeout_for(query, self._server_timeout_s)
        lane, asked = self._identity(), self._clock()
        for attempt in range(self._throttle_retries + 1):
            slot = await self._scheduler.acquire(lane, since=asked, patience_s=self._max_backoff_s)
            if isinstance(slot, Busy):
                log.info("query %s not sent: %d ahead in its lane, waited %.1f s", query_id, slot.ahead, slot.waited_s)
                return _busy_error(slot, self._scheduler.limits.queue_wait_s, self._users is not None)
            try:
                outcome = await self._attempt(client, query, kql_text, query_id, timeout_s, attempt)
            finally:
                slot.release()
            if not isinstance(outcome, _RetryIn):
                return outcome
            self._scheduler.hold(lane, outcome.delay)  # the service throttles the identity, not this query
            if attempt == self._throttle_retries or outcome.delay > self._max_backoff_s:
                log.info("query %s throttled %d time(s); not trying again", query_id, attempt + 1)
                return outcome.error
            log.info("Log Analytics throttled query %s; retrying in %.1f s", query_id, outcome.delay)
        raise AssertionError("unreachable: the loop always returns")  # pragma: no cover

    def _identity(self) -> str:
        """The lane of this turn's queries: the analyst's own with on-behalf-of, else the bot's."""
        analyst = current_analyst() if self._users is not None else None
        return f"user:{analyst.key}" if analyst is not None else "bot"

    def _backoff(self, attempt: int) -> float:
        """Exponential, with up to a quarter more at random (so throttled queries do not all come back at once)."""
        return min(self._backoff_s * (2**attempt) * (1 + random.random() / 4), self._max_backoff_s)

    async def _attempt(self, client: LogsQueryClient, query: Query, kql_text: str, query_id: str, timeout_s: int,
                       attempt: int) -> RawTable | QueryError | _RetryIn:
        """One call to Log Analytics: its table, the error to show, or how long to wait before the next try."""
        statuses: list[int] = []  # HTTP status of each response, for the shapes the SDK cannot read (204)
        started = time.monotonic()
        try:
            response = await self._query(client, query, kql_text, query_id, timeout_s, statuses)
        except TimeoutError:
            return _timeout_error(timeout_s)
        except (DecodeError, json.JSONDecodeError):  # a proxy's page, a cut-off stream, a 204's empty body
            return self._unreadable(query, query_id, statuses, "Log Analytics sent a body that is not JSON")
        except HttpResponseError as err:
            return self._http_failure(err, query_id, timeout_s, time.monotonic() - started, attempt)
        except ClientAuthenticationError as err:
            return self._credential_error(err)
        except (ServiceRequestError, ServiceResponseError) as err:
            return _unreachable_error(err)
        except _SHAPE_ERRORS as err:
            return self._unreadable(query, query_id, statuses,
                                    f"Log Analytics sent a response of an unknown shape ({type(err).__name__})")
        return _to_raw_table(response, query, query_id)

    async def _query(self, client: LogsQueryClient, query: Query, kql_text: str, query_id: str, timeout_s: int,
                     statuses: list[int]) -> LogsQueryResult | LogsQueryPartialResult:
        """The SDK's call, given up a grace period after the server's own time limit; each response's status is
        appended to ``statuses``."""
        return await asyncio.wait_for(
            client.query_workspace(
                self._workspace_id,
                kql_text,
                timespan=query.timespan,
                server_timeout=timeout_s,
                request_id=query_id,
                raw_response_hook=lambda pipeline: statuses.append(pipeline.http_response.status_code),
            ),
            timeout=timeout_s + self._grace_s,
        )

    def _http_failure(self, err: HttpResponseError, query_id: str, timeout_s: int, elapsed: float,
                      attempt: int) -> QueryError | _RetryIn:
        """The error an HTTP failure is, or, when throttled with tries left, the wait before the next one."""
        error = _http_error(err, self._workspace_id, timeout_s, elapsed)
        if self._users is not None and error.code == "forbidden":
            error = _analyst_forbidden(error, self._workspace_id)
        if error.code == "throttled":
            wait = _retry_after(err)
            final = dataclasses.replace(error, message=_throttled_text(wait, attempt + 1, self._users is not None))
            return _RetryIn(wait if wait is not None else self._backoff(attempt), final)
        log.info("query %s failed: HTTP %s %s", query_id, err.status_code, error.detail)
        return error

    def _credential_error(self, err: ClientAuthenticationError) -> QueryError:
        if self._users is not None:
            return _token_error(token_problem(err), _service_text(str(err)))
        return QueryError(
            "credential_unavailable",
            "The bot could not get an Azure token for Log Analytics. Locally, sign in with `az login`; "
            "in Azure, give the app a managed identity (set AZURE_CLIENT_ID for a user-assigned one).",
            retry_possible=False,
            detail=_service_text(str(err)),
        )

    async def _client_for_turn(self) -> LogsQueryClient | QueryError:
        """The bot's client, or in on-behalf-of mode the turn's analyst's (never the bot's: a turn without a
        signed-in analyst reads nothing)."""
        if self._users is None:
            return self._client
        analyst = current_analyst()
        if analyst is None:
            return _token_error(TokenProblem.SIGN_IN)
        client: LogsQueryClient = await self._users.client("logs", analyst)
        return client

    def _unreadable(self, query: Query, query_id: str, statuses: list[int], reason: str) -> QueryError:
        status = statuses[-1] if statuses else None
        if status == 204:  # documented: the workspace holds no data at all; not "nothing matched"
            log.info("query %s: HTTP 204, workspace %s has no data", query_id, self._workspace_id)
            return QueryError(
                "workspace_empty",
                f"Log Analytics says workspace {self._workspace_id} holds no data at all (HTTP 204), so there is "
                "nothing to search. Check that SENTINEL_WORKSPACE_ID names the workspace Microsoft Sentinel uses.",
                retry_possible=False, status=status, query_id=query_id,
            )
        return _unreadable_error(query, query_id, status, reason)

    async def prepare(self) -> None:
        return None  # nothing to warm up; the first query signs in

    async def close(self) -> None:
        self._scheduler.close()
        await self._client.close()  # the analysts' sessions (users) are closed by whoever built them: bot.app


def _to_raw_table(response: LogsQueryResult | LogsQueryPartialResult, query: Query,
                  query_id: str) -> RawTable | QueryError:
    if isinstance(response, LogsQueryPartialResult):
        error = response.partial_error
        detail = partial_detail(getattr(error, "code", None), getattr(error, "message", None),
                                getattr(error, "details", None))
        log.warning("partial result for query %s (%s): %s", query_id, detail.code, _service_text(detail.text))
        read = _read(response.partial_data, query, query_id) if response.partial_data else None
        if isinstance(read, QueryError):
            return read
        if read is None or not (read.rows or read.skipped):  # nothing came back: an error, not "no incidents"
            return QueryError(
                "partial_failure",
                f"Log Analytics could not complete the query and sent no rows: {detail.what}. Narrow the time "
                f"window or raise the minimum severity, then ask again.",
                retry_possible=True, detail=_service_text(detail.text), query_id=query_id,
            )
        return _raw(read, (detail.warning(len(read.rows)),), query_id, service_truncated=detail.service_limit)
    read = _read(response.tables, query, query_id)
    return read if isinstance(read, QueryError) else _raw(read, (), query_id)


def _read(tables: Any, query: Query, query_id: str) -> TableRead | QueryError:
    try:
        return read_table(tables, query.tool)
    except UnreadableResponse as problem:
        return _unreadable_error(query, query_id, 200, str(problem))


def _raw(read: TableRead, warnings: tuple[str, ...], query_id: str, *, service_truncated: bool = False) -> RawTable:
    if read.missing and read.rows:
        warnings += (f"The result had no {', '.join(read.missing)} column; those fields are blank.",)
    return RawTable(rows=read.rows, warnings=warnings, skipped=read.skipped, service_truncated=service_truncated,
                    query_id=query_id)


def _unreadable_error(query: Query, query_id: str, status: int | None, reason: str) -> QueryError:
    log.warning("unreadable Log Analytics response for %s (query id %s, HTTP %s): %s",
                query.tool, query_id, status, reason)
    return QueryError(
        "unreadable_response",
        f"{_service_text(reason)}, so the bot cannot tell what matched: this is not an empty result. Try again; "
        f"if it keeps happening, report query id {query_id}.",
        retry_possible=True, status=status, detail=reason, query_id=query_id,
    )


def _http_error(err: HttpResponseError, workspace_id: str, timeout_s: int, elapsed_s: float) -> QueryError:
    status = err.status_code
    code = _error_code(err)
    detail = _service_text(_error_message(err))
    if status == 429:
        wait = _retry_after(err)
        return QueryError("throttled", _throttled_text(wait, 1, False), retry_possible=wait is None or wait <= 5,
                          status=status, detail=detail)
    if status == 504:
        if elapsed_s < timeout_s * 0.9:  # the gateway gave up before the query's own limit
            return QueryError(
                "gateway_timeout",
                f"Log Analytics' gateway gave up after {elapsed_s:.1f} s (HTTP 504 Gateway Timeout), before the "
                f"query's own {timeout_s}-second limit: the service is busy or a network hop failed. Try again in "
                "a minute; if it keeps happening, ask for a shorter time window.",
                retry_possible=True, status=status, detail=detail,
            )
        return _timeout_error(timeout_s, status, detail)
    if status is not None and status >= 500:
        return QueryError(
            "server_error",
            f"Log Analytics had a temporary problem (HTTP {status}). Try again in a moment.",
            retry_possible=True, status=status, detail=detail,
        )
    # The rest will not get better by asking again: say what to fix.
    if status == 401:
        problem = ("unauthorized", "Log Analytics did not accept the bot's credentials "
                   f"(401 {code or 'Unauthorized'}). Check the identity the bot runs as (its managed identity and "
                   "AZURE_CLIENT_ID, or az login locally) and that its token is for the Log Analytics API.")
    elif status == 403:
        problem = ("forbidden", _TOKEN_PROBLEMS.get(code) or (
            f"The bot's identity may not read workspace {workspace_id} (403 {code or 'Forbidden'}): it is missing "
            f"the {READER_ROLES} role. Ask a workspace Owner to assign it on the workspace or its resource group; "
            "the grant can take a few minutes to apply."))
    elif status == 404:
        problem = ("workspace_not_found", f"Log Analytics has no workspace {workspace_id} (404). Set "
                   "SENTINEL_WORKSPACE_ID to the Workspace ID (a GUID on the workspace's Overview page), not its "
                   "name or resource id.")
    elif status == 400:
        problem = ("bad_query", "Log Analytics rejected the query as invalid. This is a problem in the bot, not in "
                   "your question; please report it with the query shown under Data sources.")
        detail = _service_text(_innermost(err)) or detail  # an analyst's own query shows it: where the error is
    else:
        problem = ("query_failed", f"The Log Analytics query failed (HTTP {status}).")
    return QueryError(*problem, retry_possible=False, status=status, detail=detail)


# 403s that are about the token, not about a missing role (Microsoft Learn, "Azure Monitor Log Analytics API errors").
_TOKEN_PROBLEMS = {
    "InvalidAuthenticationTokenAudience": (
        "The bot's token is for another service than this Log Analytics endpoint (403 "
        "InvalidAuthenticationTokenAudience). Set LOGS_ENDPOINT to the endpoint of the workspace's cloud "
        "(https://api.loganalytics.io in the public cloud)."),
    "InvalidAuthenticationToken": (
        "Log Analytics rejected the bot's token as invalid (403 InvalidAuthenticationToken). Check the identity "
        "the bot runs as (its managed identity and AZURE_CLIENT_ID, or az login locally); a restart gets a fresh "
        "token."),
}


def _analyst_forbidden(error: QueryError, workspace_id: str) -> QueryError:
    """On-behalf-of mode: a 403 is about the analyst's own roles, not the bot's."""
    return dataclasses.replace(error, message=(
        f"Log Analytics refused your account access to workspace {workspace_id} (403): queries run with your own "
        f"permissions here, and you need the {READER_ROLES} role on the workspace or its resource group. Ask a "
        "workspace Owner to assign it to you (or to a group of yours); the grant can take a few minutes to apply."))


def _token_error(problem: TokenProblem, detail: str = "") -> QueryError:
    return QueryError(problem.value, problem.message, retry_possible=problem.retry_possible, detail=detail)


@dataclasses.dataclass(frozen=True)
class _RetryIn:
    """A throttled call: try again after ``delay`` seconds, or, out of tries, say ``error``."""

    delay: float
    error: QueryError


SERVICE_LIMITS = "5 queries at a time and 200 per 30 seconds for each identity"


def _throttled_text(wait: float | None, tries: int, as_analyst: bool) -> str:
    """What a 429 means to the analyst: whose queries, how often this one was refused, when to ask again."""
    whose = "your" if as_analyst else "the bot's"
    refused = f", and refused this query {tries} times" if tries > 1 else ""
    when = f"It asked {'you' if as_analyst else 'the bot'} to wait {math.ceil(wait)} seconds: ask again after that." \
        if wait is not None else "Wait a minute and ask again."
    return f"Log Analytics is throttling {whose} queries (it allows {SERVICE_LIMITS}){refused}. {when}"


def _busy_error(busy: Busy, queue_wait_s: float, as_analyst: bool) -> QueryError:
    """A query the scheduler did not send: the service asked for a pause, or the budget stayed full too long."""
    whose = "your" if as_analyst else "the bot's"
    if busy.held_s > 0:
        return QueryError(
            "throttled",
            f"Log Analytics is throttling {whose} queries and asked for a pause of {math.ceil(busy.held_s)} more "
            "seconds, so this query was not sent. Ask again after that.",
            retry_possible=busy.held_s <= 5, detail=f"held {busy.held_s:.1f} s, {busy.ahead} ahead")
    return QueryError(
        "throttled",
        f"The bot keeps {whose} queries within Log Analytics' limits ({SERVICE_LIMITS}), and {busy.ahead} "
        f"other queries were ahead of this one: it waited {math.ceil(busy.waited_s)} seconds (at most "
        f"{math.ceil(queue_wait_s)}) and was not sent. Ask again in a minute.",
        retry_possible=True, detail=f"waited {busy.waited_s:.1f} s, {busy.ahead} ahead")


def _unreachable_error(err: ServiceRequestError | ServiceResponseError) -> QueryError:
    return QueryError(
        "unreachable",
        "Log Analytics could not be reached. Try again in a moment; if it keeps failing, check the "
        "network path to the Log Analytics endpoint (LOGS_ENDPOINT).",
        retry_possible=True,
        detail=_service_text(str(err)),
    )


def _timeout_error(server_timeout_s: int, status: int | None = None, detail: str = "") -> QueryError:
    return QueryError(
        "timeout",
        f"The query did not finish within the {server_timeout_s} s the bot gives it (server_timeout). Try "
        "a shorter time window or a higher minimum severity.",
        retry_possible=True, status=status, detail=detail,
    )


def _retry_after(err: HttpResponseError) -> float | None:
    response = getattr(err, "response", None)
    value = response.headers.get("Retry-After") if response is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _error_code(err: HttpResponseError) -> str:
    model = getattr(err, "model", None) or getattr(err, "error", None)
    return str(getattr(model, "code", "") or _body_error(err).get("code") or "")


def _error_message(err: HttpResponseError) -> str:
    model = getattr(err, "model", None) or getattr(err, "error", None)
    code = _error_code(err)
    inner: Any = _body_error(err)
    while isinstance(inner.get("innererror"), dict):
        inner = inner["innererror"]
    message = getattr(model, "message", "") or inner.get("message") or err.message or ""
    return f"{code}: {message}" if code else str(message)


def _innermost(err: HttpResponseError) -> str:
    """The deepest message of the error body, with its line and position when the service gives them (a syntax
    error: "Query could not be parsed at 'x' on line [1,12]")."""
    inner: Any = _body_error(err)
    while isinstance(inner.get("innererror"), dict):
        inner = inner["innererror"]
    message = str(inner.get("message") or "")
    where = [f"{key} {inner[key]}" for key in ("line", "pos") if isinstance(inner.get(key), int)]
    return f"{message} ({', '.join(where)})" if message and where else message


def _body_error(err: HttpResponseError) -> dict[str, Any]:
    """The OneAPI error object of the response body: the SDK drops it for some statuses (a 401 among them)."""
    try:
        body = json.loads(err.response.text()) if err.response is not None else None
    except (ValueError, TypeError, AttributeError):
        return {}
    error = body.get("error") if isinstance(body, dict) else None
    return error if isinstance(error, dict) else {}


def _service_text(text: str) -> str:
    """Service error text, shortened and on one line, for logs and warnings."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= MAX_SERVICE_TEXT else flat[: MAX_SERVICE_TEXT - 3] + "..."
