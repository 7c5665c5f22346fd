"""Which pasted links name an incident of this bot's workspace: strict parsing of portal incident links, pure.

Two formats unfurl (the link Teams sends with a ``composeExtension/queryLink`` invoke):

- the Azure portal's Sentinel incident link, as Sentinel itself writes it in ``IncidentUrl``::

    https://portal.azure.com/#asset/Microsoft_Azure_Security_Insights/Incident/subscriptions/<sub>/resourceGroups/
    <rg>/providers/Microsoft.OperationalInsights/workspaces/<workspace>/providers/Microsoft.SecurityInsights/
    Incidents/<incident name, a GUID>

  optionally with the portal's directory part ``#@<tenant domain or id>/asset/...``. It names an incident only
  when its subscription, resource group and workspace are this bot's (ARM compares them case-insensitively);

- the Defender portal's incident link, ``https://security.microsoft.com/incidents/<id>`` (or ``/incident2/<id>``),
  optionally followed by a tab (``/overview``, ``/alerts``...) and ``?tid=<tenant id>``; the id is the incident's
  ``ProviderIncidentId``. A ``tid`` must be one of the tenants the bot serves.

Anything else (another host, however alike it looks; user info or a port; another workspace; another tenant;
a path that is not an incident; unknown query parameters) names nothing, and the link is left alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

AZURE_PORTAL = "portal.azure.com"
DEFENDER_PORTAL = "security.microsoft.com"
PORTAL_DOMAINS = (AZURE_PORTAL, DEFENDER_PORTAL)
MAX_LINK_CHARS = 2048

_GUID = r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}"
_NAME = r"[A-Za-z0-9._()-]{1,90}"  # resource group names; workspace names are a subset
_AZURE_FRAGMENT = re.compile(
    rf"(?:@(?P<tenant>{_GUID}|[A-Za-z0-9.-]{{1,253}})/)?asset/Microsoft_Azure_Security_Insights/Incident"
    rf"/subscriptions/(?P<sub>{_GUID})/resourceGroups/(?P<rg>{_NAME})"
    rf"/providers/Microsoft\.OperationalInsights/workspaces/(?P<ws>{_NAME})"
    rf"/providers/Microsoft\.SecurityInsights/Incidents/(?P<name>{_GUID})", re.ASCII | re.IGNORECASE)
_DEFENDER_PATH = re.compile(r"/(?:incidents|incident2)/(?P<id>[0-9]{1,12})(?:/[a-z]{1,30})?/?", re.ASCII)
_TENANT = re.compile(_GUID, re.ASCII)


@dataclass(frozen=True)
class Workspace:
    """The workspace an Azure portal link must name, and the tenants a Defender link's ``tid`` may name."""

    subscription_id: str
    resource_group: str
    workspace_name: str
    tenants: frozenset[str] = frozenset()  # lower-case tenant ids; empty: any tid is refused, none is fine


@dataclass(frozen=True)
class IncidentLink:
    """The incident a link names: ``incident_ref`` is what get_incident_detail takes."""

    portal: str  # "sentinel" or "defender"
    incident_ref: str


def incident_link(url: object, workspace: Workspace | None) -> IncidentLink | None:
    """The incident ``url`` names in ``workspace``, or None (not a link this bot unfurls)."""
    if workspace is None or not isinstance(url, str) or not url or len(url) > MAX_LINK_CHARS \
            or not url.isascii() or any(c.isspace() or c in '\\"<>^`{|}' for c in url):
        return None  # look-alike letters, whitespace and the characters no URL carries raw: not a portal link
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme != "https" or parts.username is not None or parts.password is not None or port is not None:
        return None
    host = (parts.hostname or "").rstrip(".")
    if parts.netloc.lower().rstrip(".") != host:
        return None
    if host == AZURE_PORTAL:
        return _sentinel(parts.path, parts.query, parts.fragment, workspace)
    if host == DEFENDER_PORTAL:
        return _defender(parts.path, parts.query, parts.fragment, workspace)
    return None


def _sentinel(path: str, query: str, fragment: str, workspace: Workspace) -> IncidentLink | None:
    if path not in ("", "/") or query:
        return None
    match = _AZURE_FRAGMENT.fullmatch(fragment)
    if match is None:
        return None
    tenant = match.group("tenant")
    if tenant and _TENANT.fullmatch(tenant) and tenant.lower() not in workspace.tenants:
        return None  # a directory named by id must be one the bot serves (a domain cannot be checked here)
    same = (match.group("sub").lower() == workspace.subscription_id.lower()
            and match.group("rg").lower() == workspace.resource_group.lower()
            and match.group("ws").lower() == workspace.workspace_name.lower())
    return IncidentLink("sentinel", match.group("name").lower()) if same else None


def _defender(path: str, query: str, fragment: str, workspace: Workspace) -> IncidentLink | None:
    match = _DEFENDER_PATH.fullmatch(path)
    if match is None or fragment:
        return None
    try:
        params = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query), max_num_fields=2)
    except ValueError:
        return None
    if any(key != "tid" for key, _ in params) or len(params) > 1:
        return None
    if params and params[0][1].lower() not in workspace.tenants:
        return None
    return IncidentLink("defender", f"defender:{match.group('id')}")
