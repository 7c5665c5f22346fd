"""Incident writes through Microsoft Sentinel's REST API on Azure Resource Manager.

GET the incident with its etag, PUT it back whole with the change made (Sentinel replaces every
property, and refuses a stale etag: someone changed the incident since the analyst confirmed), PUT a
comment under an id the caller chose (Microsoft Learn REST reference: Incidents - Create Or Update and
Incident Comments - Create Or Update, in Azure/azure-rest-api-specs specification/securityinsights).
One azure-core pipeline: a bearer token for ARM from the shared credential, a bounded retry of 429/5xx
that honours Retry-After up to a cap, and a deadline per operation, retries included.

Retrying a PUT is safe: an update carries the etag (if the first attempt landed, the retry is refused
as a conflict, never applied twice) and a comment's id is client-chosen (a retry rewrites the same
comment). Every failure becomes a WriteError whose message says what to do next; the service's own
text and its correlation id stay in ``detail``, for the logs.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any
from urllib.parse import quote, urlsplit

from azure.core import AsyncPipelineClient
from azure.core.credentials_async import AsyncTokenCredential
from azure.core.exceptions import (
    AzureError,
    ClientAuthenticationError,
    ServiceRequestTimeoutError,
    ServiceResponseTimeoutError,
)
from azure.core.pipeline.policies import (
    AsyncBearerTokenCredentialPolicy,
    AsyncRetryPolicy,
    DistributedTracingPolicy,
    RequestIdPolicy,
    UserAgentPolicy,
)
from azure.core.pipeline.transport import AsyncHttpTransport
from azure.core.rest import HttpRequest

from bot.sentinel.changes import (
    IncidentChange,
    IncidentSnapshot,
    WriteError,
    WriteRequest,
    comment_request,
    update_request,
)
from bot.sentinel.models import one_line

log = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "https://management.azure.com"
DEFAULT_API_VERSION = "2025-09-01"
RESPONDER_ROLE = "Microsoft Sentinel Responder"
RESPONDER_ROLE_ID = "3e150937-b8fe-4cfb-8069-0eaf05ecd056"
MAX_SERVICE_TEXT = 300
# Incident and comment resource names: GUIDs in practice; never anything that could change the URL's path.
_RESOURCE_NAME = re.compile(r"^[0-9A-Za-z][0-9A-Za-z_-]{0,99}$")


class _RetryPolicy(AsyncRetryPolicy):
    """azure-core's retry (429, 408, 500, 502, 503, 504; Retry-After honoured), except that a Retry-After
    longer than the back-off cap ends the retries: the analyst is told "throttled" instead of waiting."""

    def is_retry(self, settings: dict[str, Any], response: Any) -> bool:
        wait = self.get_retry_after(response)
        if wait is not None and wait > self.backoff_max:
            return False
        return super().is_retry(settings, response)


class ArmIncidentWriter:
    is_demo = False

    def __init__(self, *, subscription_id: str, resource_group: str, workspace_name: str,
                 credential: AsyncTokenCredential, endpoint: str = DEFAULT_ENDPOINT,
                 api_version: str = DEFAULT_API_VERSION, timeout_seconds: float = 30,
                 transport: AsyncHttpTransport | None = None, scope: str | None = None,
                 retries: int = 3, backoff_seconds: float = 0.5, max_backoff_seconds: float = 10,
                 use_env_settings: bool = True) -> None:
        endpoint = endpoint.rstrip("/")
        if urlsplit(endpoint).scheme != "https":
            raise ValueError(f"the ARM endpoint must be https (the bot sends a bearer token): {endpoint!r}")
        if scope is None:
            scope = f"{DEFAULT_ENDPOINT}/.default" if urlsplit(endpoint).hostname == "management.azure.com" \
                else f"{endpoint}/.default"
        self._resource_group = resource_group
        self._workspace_name = workspace_name
        self._provider = (f"{endpoint}/subscriptions/{_segment(subscription_id)}/resourceGroups/"
                          f"{_segment(resource_group)}/providers/Microsoft.OperationalInsights/workspaces/"
                          f"{_segment(workspace_name)}/providers/Microsoft.SecurityInsights")
        self._api_version = api_version
        self._timeout = timeout_seconds
        policies = [
            RequestIdPolicy(),  # x-ms-client-request-id: ARM logs it, support can find the request
            UserAgentPolicy(sdk_moniker="sentinel-teams-assistant"),
            _RetryPolicy(retry_total=retries, retry_backoff_factor=backoff_seconds,
                         retry_backoff_max=max_backoff_seconds, timeout=timeout_seconds),
            AsyncBearerTokenCredentialPolicy(credential, scope),
            DistributedTracingPolicy(),
        ]
        # use_env_settings: the default transport reads proxy settings from the environment (see config.env_proxies).
        self._client: AsyncPipelineClient = AsyncPipelineClient(endpoint, policies=policies, transport=transport,
                                                                use_env_settings=use_env_settings)

    async def read(self, incident_name: str) -> IncidentSnapshot:
        return _snapshot(await self._call(WriteRequest("GET", f"incidents/{_name(incident_name)}", {})))

    async def update(self, incident: IncidentSnapshot, change: IncidentChange) -> IncidentSnapshot:
        _name(incident.name)
        return _snapshot(await self._call(update_request(incident, change)))

    async def add_comment(self, incident_name: str, comment_id: str, message: str) -> None:
        if not (message or "").strip():
            raise WriteError("bad_request", "The comment is empty; say what to write.")
        await self._call(comment_request(_name(incident_name), _name(comment_id), message))

    async def close(self) -> None:
        await self._client.close()

    async def _call(self, write: WriteRequest) -> dict[str, Any]:
        method, path = write.method, write.path.removeprefix("incidents/")
        request = HttpRequest(method, f"{self._provider}/{write.path}", params={"api-version": self._api_version},
                              json=write.body if method != "GET" else None)
        try:
            response = await asyncio.wait_for(
                self._client.send_request(request, connection_timeout=self._timeout, read_timeout=self._timeout),
                timeout=self._timeout)
        except (TimeoutError, ServiceRequestTimeoutError, ServiceResponseTimeoutError) as err:
            outcome = ("The change may or may not have been saved: look at the incident before trying again."
                       if method == "PUT" else "Try again in a moment.")
            raise WriteError("timeout", f"Sentinel did not answer within {self._timeout:g} seconds. {outcome}",
                             detail=_text(repr(err)), retry_possible=True) from None
        except ClientAuthenticationError as err:
            raise WriteError("unauthorized", "The bot could not sign in to Azure Resource Manager, so nothing was "
                             "changed. Check the identity it runs as (its managed identity and AZURE_CLIENT_ID, or "
                             "az login locally).", detail=_text(str(err))) from None
        except AzureError as err:  # connection refused or reset, DNS, TLS, retries used up
            raise WriteError("unavailable", "Azure Resource Manager could not be reached. Try again in a moment; "
                             "if it keeps failing, check the bot's network path to management.azure.com.",
                             detail=_text(str(err)), retry_possible=True) from None
        except Exception as err:  # never let a library surprise escape as anything but a WriteError
            log.exception("unexpected error calling Sentinel")
            raise WriteError("unavailable", "Talking to Sentinel failed unexpectedly. Try again in a moment.",
                             detail=_text(repr(err)), retry_possible=True) from None
        if 200 <= response.status_code < 300:
            try:
                data = response.json() if response.content else {}
            except ValueError:
                data = None
            if not isinstance(data, dict):
                raise WriteError("unavailable", "Sentinel sent an answer the bot could not read. Try again in a "
                                 "moment.", status=response.status_code, retry_possible=True,
                                 detail=_text(response.text()))
            return data
        error = self._http_error(response.status_code, *_service_error(response))
        log.warning("Sentinel %s %s failed: HTTP %s (%s)", method, path.split("/")[0], error.status, error.detail)
        raise error

    def _http_error(self, status: int, code: str, message: str, correlation: str) -> WriteError:
        detail = _text(f"{code}: {message} (correlation id {correlation})")
        if status == 401:
            return WriteError("unauthorized", "Azure Resource Manager did not accept the bot's sign-in (401), so "
                              "nothing was changed. Check the identity the bot runs as (its managed identity and "
                              "AZURE_CLIENT_ID, or az login locally).", status=status, detail=detail)
        if status == 403:
            return WriteError("forbidden", f"The bot's identity may not change incidents in workspace "
                              f"{self._workspace_name} (403), so nothing was changed. Ask an Azure administrator "
                              f"to grant it the {RESPONDER_ROLE} role on the resource group {self._resource_group} "
                              f"or on workspace {self._workspace_name}.", status=status,
                              detail=f"{detail}; role definition id {RESPONDER_ROLE_ID}")
        if status == 404:
            return WriteError("not_found", "Sentinel has no such incident (404). It may have been deleted; "
                              "otherwise SENTINEL_SUBSCRIPTION_ID, SENTINEL_RESOURCE_GROUP or "
                              "SENTINEL_WORKSPACE_NAME names the wrong workspace.", status=status, detail=detail)
        if status in (409, 412):
            return WriteError("conflict", "The incident changed since you looked at it (someone else updated it), "
                              "so your change was not saved. Look at it again and confirm the change once more.",
                              status=status, detail=detail)
        if status == 429:
            return WriteError("throttled", "Azure Resource Manager is throttling the bot's requests right now, so "
                              "nothing was changed. Wait a minute and try again.", status=status, detail=detail,
                              retry_possible=True)
        if status >= 500:
            return WriteError("unavailable", f"Sentinel had a temporary problem (HTTP {status}). Try again in a "
                              "moment.", status=status, detail=detail, retry_possible=True)
        # 400 and the rest: Sentinel refused the values. Its message can echo incident text (attacker-written).
        reason = one_line(message or code or "no reason given", MAX_SERVICE_TEXT)
        return WriteError("bad_request", f"Sentinel refused the change (HTTP {status}): {reason}", status=status,
                          detail=detail)


def _name(value: str) -> str:
    if not isinstance(value, str) or not _RESOURCE_NAME.fullmatch(value):
        raise WriteError("bad_request", "That is not a Sentinel incident id, so nothing was sent. Refer to the "
                         "incident by its number.", detail=f"refused resource name {one_line(value, 80)!r}")
    return value


def _segment(value: str) -> str:
    return quote(str(value), safe="")


def _snapshot(resource: dict[str, Any]) -> IncidentSnapshot:
    try:
        return IncidentSnapshot.from_api(resource)
    except (TypeError, ValueError) as err:
        raise WriteError("unavailable", "Sentinel sent an incident the bot could not read. Try again in a moment.",
                         detail=_text(repr(err)), retry_possible=True) from None


def _service_error(response: Any) -> tuple[str, str, str]:
    """(code, message, correlation id) of an ARM error response ({"error": {"code", "message"}})."""
    correlation = response.headers.get("x-ms-correlation-request-id") or response.headers.get("x-ms-request-id")
    try:
        error = response.json().get("error") or {}
        return str(error.get("code") or ""), str(error.get("message") or ""), correlation or "none"
    except (ValueError, AttributeError):
        return "", response.text()[: MAX_SERVICE_TEXT * 2], correlation or "none"


def _text(text: str) -> str:
    """Service text for logs: one line, bounded."""
    return one_line(text, MAX_SERVICE_TEXT)
