"""A fake Azure Resource Manager endpoint for Sentinel incident writes, over HTTPS, for the real ArmIncidentWriter.

It speaks the wire format of Sentinel's REST API (Microsoft Learn REST reference "Incidents - Create Or Update",
"Incident Comments - Create Or Update"; Azure/azure-rest-api-specs, specification/securityinsights): GET and PUT
``/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.OperationalInsights/workspaces/{ws}/providers/
Microsoft.SecurityInsights/incidents/{name}?api-version=...`` (a PUT is a full replace, checked against the
incident's etag: a stale one gets ARM's 409 ``Conflict``), and PUT ``.../incidents/{name}/comments/{id}``
(201, or 200 when the id exists). It validates like Sentinel does where the behaviour is documented (title,
severity and status required; enums; a closed incident needs a classification, BenignPositive a reason),
records every request in order (method, path, query, headers incl. Authorization, parsed JSON body), counts
PUTs, and can be scripted: the next N answers for a method and path pattern (status, body, Retry-After,
delay), and changes made "behind the bot's back" (``touch``: new etag).

Adding a comment changes the incident's etag here (its commentsCount changes). Whether Sentinel does is
unverified, so the stricter behaviour is modelled: code must not reuse an etag read before a comment.

In tests (same event loop as the code under test)::

    async with FakeArm(tmp_path) as arm:
        arm.add_incident(number=42, title="Suspicious sign-in", severity="High")
        writer = ArmIncidentWriter(endpoint=arm.endpoint, credential=FakeCredential(), transport=arm.transport(),
                                   **arm.workspace)

Standalone, for an end-to-end test with the bot in another process::

    python -m tests.support.arm_fake --port 8443 [--incidents incidents.json] [--ca-file ca.pem] [--any-token]

prints ``ARM_ENDPOINT=https://127.0.0.1:8443`` and ``ARM_CA_FILE=<pem>`` and serves until SIGINT/SIGTERM. A test
in another process drives it through ``/_fake/...`` (GET requests, GET/POST incidents, POST fail, POST touch).
TLS: azure-core refuses to send a bearer token over plain HTTP (``enforce_https``), so the fake always serves
HTTPS from a throwaway trustme CA. The bot process trusts it with ``SSL_CERT_FILE=<pem>``: azure-core's
AioHttpTransport (connection_verify=True) uses aiohttp's default context, ``ssl.create_default_context()``,
which loads OpenSSL's default verify paths, and those honour SSL_CERT_FILE (tested in
test_incident_writer.py). REQUESTS_CA_BUNDLE does nothing here (it is read by ``requests`` only). SSL_CERT_FILE
replaces the system CAs for the whole process; if the bot also needs real endpoints, point it at a bundle of
the system CAs plus this PEM. The bot process also needs a credential whose token the fake accepts: start the
fake with ``--any-token`` (any non-empty bearer token) unless the bot uses ``FakeCredential``'s token.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import signal
import ssl
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

import aiohttp
import trustme
from aiohttp import web
from azure.core.pipeline.transport import AioHttpTransport

from tests.support.loganalytics_fake import TOKEN, FakeCredential
from tests.support.serving import serve

__all__ = ["TOKEN", "FakeArm", "FakeCredential", "RecordedRequest", "arm_error"]

SUBSCRIPTION_ID = "6b0e1c1e-2f1a-4c55-9e0d-3b8f5a7c9d21"
RESOURCE_GROUP = "soc-rg"
WORKSPACE_NAME = "soc-workspace"
PORTAL = "https://portal.azure.com"
APP_OBJECT_ID = "5f1d7c3a-0000-4000-8000-00000000b07a"  # the bot's identity, as comment author
READ_ONLY = ("incidentNumber", "incidentUrl", "createdTimeUtc", "lastModifiedTimeUtc", "additionalData",
             "relatedAnalyticRuleIds", "providerName", "providerIncidentId")
ENUMS = {
    "severity": ("High", "Medium", "Low", "Informational"),
    "status": ("New", "Active", "Closed"),
    "classification": ("Undetermined", "TruePositive", "BenignPositive", "FalsePositive"),
    "classificationReason": ("SuspiciousActivity", "SuspiciousButExpected", "IncorrectAlertLogic", "InaccurateData"),
}
_PATH = re.compile(
    r"^/subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<rg>[^/]+)/providers/Microsoft\.OperationalInsights/"
    r"workspaces/(?P<ws>[^/]+)/providers/Microsoft\.SecurityInsights/incidents/(?P<name>[^/]+)"
    r"(?:/comments/(?P<comment>[^/]+))?$", re.IGNORECASE)  # ARM paths are case-insensitive
_ERROR_CODES = {400: "BadRequest", 401: "AuthenticationFailed", 403: "AuthorizationFailed", 404: "NotFound",
                409: "Conflict", 412: "PreconditionFailed", 429: "TooManyRequests", 500: "InternalServerError",
                502: "BadGateway", 503: "ServiceUnavailable", 504: "GatewayTimeout"}


def arm_error(code: str, message: str) -> dict[str, Any]:
    """ARM's error body."""
    return {"error": {"code": code, "message": message}}


@dataclass
class RecordedRequest:
    method: str
    path: str  # decoded
    raw_path: str  # as sent (percent-encoded)
    query: dict[str, str]
    headers: dict[str, str]
    body: Any  # parsed JSON, or None
    received_at: float = 0.0  # time.monotonic()


@dataclass
class _Rule:
    method: str  # "GET", "PUT" or "*"
    path: re.Pattern[str]
    times: int
    status: int | None  # None: answer normally, after the delay
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0

    def matches(self, method: str, path: str) -> bool:
        return self.times > 0 and self.method in ("*", method) and bool(self.path.search(path))


class FakeArm:
    def __init__(self, tmp_path: Path | None = None, *, subscription_id: str = SUBSCRIPTION_ID,
                 resource_group: str = RESOURCE_GROUP, workspace_name: str = WORKSPACE_NAME,
                 token: str | None = TOKEN, clock: Callable[[], datetime] = lambda: datetime.now(UTC),
                 host: str = "127.0.0.1", port: int = 0, ca_file: Path | None = None) -> None:
        self.workspace = {"subscription_id": subscription_id, "resource_group": resource_group,
                          "workspace_name": workspace_name}
        self.token = token  # None: any non-empty bearer token
        self.clock = clock
        self.incidents: dict[str, dict[str, Any]] = {}  # resource name -> ARM resource
        self.comments: dict[str, dict[str, dict[str, Any]]] = {}  # incident name -> comment id -> resource
        self.requests: list[RecordedRequest] = []
        self.puts = 0  # PUT requests received, whatever the answer ("no write happened": puts == 0)
        self.writes = 0  # PUTs that changed something
        self.latency_s = 0.0  # added to every answer
        self._rules: list[_Rule] = []
        self.delays_done = 0  # delayed answers that were sent: 0 means no client waited one out
        self._etags = 0
        if ca_file is None:
            directory = Path(tmp_path) if tmp_path is not None else Path(tempfile.mkdtemp(prefix="fake-arm-"))
            ca_file = directory / "fake-arm-ca.pem"
        ca = trustme.CA()
        self.ca_file = Path(ca_file)
        ca.cert_pem.write_to_path(str(self.ca_file))
        self._server_ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("127.0.0.1", "localhost").configure_cert(self._server_ssl)
        self._host, self._port = host, port
        self._runner: web.AppRunner | None = None
        self.endpoint = ""

    # -- lifecycle ---------------------------------------------------------------------------------------

    async def start(self) -> FakeArm:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # A short shutdown timeout: a scripted delay must not hold up stop().
        self._runner, port = await serve(app, host=self._host, port=self._port, ssl_context=self._server_ssl,
                                         shutdown_timeout=0.5)
        self.endpoint = f"https://127.0.0.1:{port}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def transport(self) -> AioHttpTransport:
        """An azure-core transport trusting the fake's CA (one SSL context, so connections are reused)."""
        context = ssl.create_default_context(cafile=str(self.ca_file))
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context))
        return AioHttpTransport(session=session, session_owner=True)

    # -- priming and scripting ---------------------------------------------------------------------------

    def add_incident(self, *, number: int, name: str | None = None, title: str = "Demo incident",
                     severity: str = "Medium", status: str = "New", owner: Mapping[str, Any] | str | None = None,
                     description: str = "", classification: str | None = None,
                     classification_reason: str | None = None, classification_comment: str | None = None,
                     labels: Iterable[str] = (), **properties: Any) -> dict[str, Any]:
        """Prime an incident (owner: ARM's owner object, or a UPN/name). Returns its resource."""
        name = name or f"{number:08x}-0000-4000-8000-{number:012x}"
        if isinstance(owner, str):
            owner = {"userPrincipalName": owner, "email": owner} if "@" in owner else {"assignedTo": owner}
        stamp = self._now()
        props: dict[str, Any] = {
            "title": title, "description": description, "severity": severity, "status": status,
            "owner": {"objectId": None, "email": None, "assignedTo": None, "userPrincipalName": None,
                      "ownerType": "User" if owner else "Unknown", **dict(owner or {})},
            "labels": [{"labelName": label, "labelType": "User"} for label in labels],
            "classification": classification, "classificationReason": classification_reason,
            "classificationComment": classification_comment,
            "firstActivityTimeUtc": stamp, "lastActivityTimeUtc": stamp,
            "incidentNumber": number, "createdTimeUtc": stamp, "lastModifiedTimeUtc": stamp,
            "incidentUrl": f"{PORTAL}/#asset/Microsoft_Azure_Security_Insights/Incident{self._id(name)}",
            "additionalData": {"alertsCount": 1, "bookmarksCount": 0, "commentsCount": 0,
                               "alertProductNames": ["Azure Sentinel"], "tactics": []},
            "relatedAnalyticRuleIds": [], "providerName": "Azure Sentinel", "providerIncidentId": str(number),
            **properties,
        }
        resource = {"id": self._id(name), "name": name, "etag": self._next_etag(),
                    "type": "Microsoft.SecurityInsights/Incidents",
                    "properties": {k: v for k, v in props.items() if v is not None}}
        self.incidents[name] = resource
        return resource

    def add_incidents(self, incidents: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        return [self.add_incident(**dict(item)) for item in incidents]

    def incident(self, number: int) -> dict[str, Any]:
        """The resource of incident ``number``."""
        return next(r for r in self.incidents.values() if r["properties"]["incidentNumber"] == number)

    def touch(self, name: str, **properties: Any) -> str:
        """Someone else changes the incident (the properties given, if any): new etag, which is returned."""
        resource = self.incidents[name]
        resource["properties"].update(properties, lastModifiedTimeUtc=self._now())
        resource["etag"] = self._next_etag()
        return resource["etag"]

    def fail(self, status: int, *, method: str = "*", path: str = ".*", times: int = 1, body: Any = None,
             retry_after: float | str | None = None, headers: Mapping[str, str] | None = None,
             delay_s: float = 0.0) -> None:
        """The next ``times`` requests matching ``method`` and the regex ``path`` get ``status`` (ARM's error body
        for it unless ``body`` is given). Rules are consulted in the order they were added."""
        all_headers = dict(headers or {})
        if retry_after is not None:
            all_headers["Retry-After"] = str(retry_after)
        if body is None:
            code = _ERROR_CODES.get(status, "Error")
            body = arm_error(code, f"Scripted {code} from the fake ARM endpoint")
        self._rules.append(_Rule(method.upper(), re.compile(path), times, status, body, all_headers, delay_s))

    def delay(self, seconds: float, *, method: str = "*", path: str = ".*", times: int = 1) -> None:
        """The next ``times`` matching requests are answered normally, ``seconds`` late."""
        self._rules.append(_Rule(method.upper(), re.compile(path), times, None, delay_s=seconds))

    def requests_for(self, method: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.method == method.upper()]

    # -- the service -------------------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.path.startswith("/_fake/"):
            return await self._control(request)
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        self.requests.append(RecordedRequest(request.method, request.path, request.raw_path.split("?")[0],
                                             dict(request.query), dict(request.headers), body, time.monotonic()))
        if request.method == "PUT":
            self.puts += 1
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        rule = next((r for r in self._rules if r.matches(request.method, request.path)), None)
        if rule is not None:
            rule.times -= 1
            if rule.delay_s:
                await asyncio.sleep(rule.delay_s)
                self.delays_done += 1
            if rule.status is not None:
                return web.json_response(rule.body, status=rule.status, headers=rule.headers)
        return self._answer(request, body)

    def _answer(self, request: web.Request, body: Any) -> web.Response:
        authorization = request.headers.get("Authorization", "")
        expected = f"Bearer {self.token}" if self.token is not None else None
        if not authorization.startswith("Bearer ") or len(authorization) < 8 or expected not in (None, authorization):
            return _error(401, "InvalidAuthenticationToken", "The access token is invalid.")
        if not request.query.get("api-version"):
            return _error(400, "MissingApiVersionParameter", "The api-version query parameter (?api-version=) is "
                                                             "required for all requests.")
        match = _PATH.match(request.path)
        if match is None:
            return _error(404, "InvalidResourceType", "The resource type could not be found in the namespace.")
        for key, setting, code in (("sub", "subscription_id", "SubscriptionNotFound"),
                                   ("rg", "resource_group", "ResourceGroupNotFound"),
                                   ("ws", "workspace_name", "ResourceNotFound")):
            if match[key].lower() != self.workspace[setting].lower():
                return _error(404, code, f"The {setting.replace('_', ' ')} '{match[key]}' could not be found.")
        resource = self.incidents.get(match["name"])
        if resource is None:
            return _error(404, "NotFound", f"Incident '{match['name']}' was not found.")
        if match["comment"] is not None:
            if request.method != "PUT":
                return _error(405, "MethodNotAllowed", f"The fake does not serve {request.method} on comments.")
            return self._put_comment(resource, match["comment"], body)
        if request.method == "GET":
            return web.json_response(resource)
        if request.method == "PUT":
            return self._put_incident(resource, body)
        return _error(405, "MethodNotAllowed", f"The fake does not serve {request.method} on incidents.")

    def _put_incident(self, resource: dict[str, Any], body: Any) -> web.Response:
        props = body.get("properties") if isinstance(body, dict) else None
        if not isinstance(props, dict):
            return _error(400, "BadRequest", "The request content was invalid and could not be deserialized.")
        problem = _invalid(props)
        if problem:
            return _error(400, "BadRequest", problem)
        if body.get("etag") is not None and body["etag"] != resource["etag"]:
            return _error(409, "Conflict", f"New version of resource '{resource['name']}' exists. Data was not saved")
        current = resource["properties"]
        resource["properties"] = {**{k: v for k, v in props.items() if k not in READ_ONLY},
                                  **{k: current[k] for k in READ_ONLY if k in current},
                                  "lastModifiedTimeUtc": self._now()}
        resource["etag"] = self._next_etag()
        self.writes += 1
        return web.json_response(resource)

    def _put_comment(self, resource: dict[str, Any], comment_id: str, body: Any) -> web.Response:
        props = body.get("properties") if isinstance(body, dict) else None
        message = props.get("message") if isinstance(props, dict) else None
        if not isinstance(message, str) or not message.strip():
            return _error(400, "BadRequest", "Required property 'message' not found in JSON.")
        comments = self.comments.setdefault(resource["name"], {})
        existing = comments.get(comment_id)
        stamp = self._now()
        comments[comment_id] = {
            "id": f"{resource['id']}/Comments/{comment_id}", "name": comment_id, "etag": self._next_etag(),
            "type": "Microsoft.SecurityInsights/Incidents/Comments",
            "properties": {"message": message, "createdTimeUtc": existing["properties"]["createdTimeUtc"]
                           if existing else stamp, "lastModifiedTimeUtc": stamp,
                           "author": {"objectId": APP_OBJECT_ID, "email": None, "userPrincipalName": None,
                                      "name": "Sentinel assistant"}},
        }
        if existing is None:
            data = resource["properties"].setdefault("additionalData", {})
            data["commentsCount"] = data.get("commentsCount", 0) + 1
            resource["properties"]["lastModifiedTimeUtc"] = stamp
            resource["etag"] = self._next_etag()
        self.writes += 1
        return web.json_response(comments[comment_id], status=200 if existing else 201)

    # -- control API for a test in another process -------------------------------------------------------

    async def _control(self, request: web.Request) -> web.Response:
        action = request.path.removeprefix("/_fake/")
        data = await request.json() if request.can_read_body else None
        if action == "requests" and request.method == "GET":
            return web.json_response([asdict(r) for r in self.requests])
        if action == "incidents" and request.method == "GET":
            return web.json_response(self.incidents)
        if action == "incidents" and request.method == "POST":
            return web.json_response(self.add_incidents(data))
        if action == "fail" and request.method == "POST":
            self.fail(**data)
            return web.json_response({"ok": True})
        if action == "touch" and request.method == "POST":
            return web.json_response({"etag": self.touch(data["name"], **data.get("properties", {}))})
        if action == "counts" and request.method == "GET":
            return web.json_response({"puts": self.puts, "writes": self.writes, "requests": len(self.requests)})
        return _error(404, "NotFound", f"no control action {request.method} {action}")

    # -- helpers -----------------------------------------------------------------------------------------

    def _id(self, name: str) -> str:
        ws = self.workspace
        return (f"/subscriptions/{ws['subscription_id']}/resourceGroups/{ws['resource_group']}/providers/"
                f"Microsoft.OperationalInsights/workspaces/{ws['workspace_name']}/providers/"
                f"Microsoft.SecurityInsights/Incidents/{name}")

    def _next_etag(self) -> str:
        self._etags += 1
        return f'"{self._etags:08x}-0000-0000-0000-000000000000"'

    def _now(self) -> str:
        return self.clock().astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _invalid(props: dict[str, Any]) -> str | None:
    """Sentinel's refusals of an incident PUT: required properties and enums from the REST API spec; the
    closing rules (classification when Closed, a reason for BenignPositive) as the service reports them."""
    for key in ("title", "severity", "status"):
        if not props.get(key):
            return f"Required property '{key}' not found in JSON."
    for key, allowed in ENUMS.items():
        if props.get(key) is not None and props[key] not in allowed:
            return f"Error converting value \"{props[key]}\" to type '{key}'."
    if props["status"] == "Closed" and not props.get("classification"):
        return "To update incident status as 'closed', request must include classification."
    if props.get("classification") == "BenignPositive" and not props.get("classificationReason"):
        return "classification 'BenignPositive' must have classificationReason."
    return None


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response(arm_error(code, message), status=status,
                             headers={"x-ms-correlation-request-id": "00000000-fake-4000-8000-000000000000"})


async def _serve(args: argparse.Namespace) -> None:
    arm = FakeArm(token=None if args.any_token else TOKEN, port=args.port,
                  ca_file=Path(args.ca_file) if args.ca_file else None)
    if args.incidents:
        arm.add_incidents(json.loads(await asyncio.to_thread(Path(args.incidents).read_text, encoding="utf-8")))
    await arm.start()
    print(f"ARM_ENDPOINT={arm.endpoint}", flush=True)
    print(f"ARM_CA_FILE={arm.ca_file}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await arm.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A fake ARM endpoint for Sentinel incident writes (HTTPS).")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free port)")
    parser.add_argument("--ca-file", help="where to write the CA certificate (PEM) the client must trust")
    parser.add_argument("--incidents", help="a JSON file: a list of incidents as FakeArm.add_incident takes them")
    parser.add_argument("--any-token", action="store_true", help="accept any bearer token, not only the test token")
    asyncio.run(_serve(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
