"""The evidence queries of an entity investigation, one module per kind of evidence (``EVIDENCE``, in the order an
investigation shows them). Each is internal (not a tool of its own) and declares the entity kinds it reads
(``kinds``); ``bot.investigation`` runs the ones that fit an entity, concurrently."""

from __future__ import annotations

from bot.sentinel.queries.evidence import (
    device_files,
    device_logons,
    device_network,
    device_processes,
    directory,
    email,
    risk_detections,
    risky_user,
    signins,
    threat_intel,
    ueba,
    url_clicks,
)
from bot.sentinel.queries.evidence.common import EvidenceQuery
from bot.sentinel.spec import QuerySpec

EVIDENCE: tuple[tuple[QuerySpec, type[EvidenceQuery]], ...] = (
    (threat_intel.SPEC, threat_intel.ThreatIntelQuery),
    (risky_user.SPEC, risky_user.RiskyUserQuery),
    (risk_detections.SPEC, risk_detections.RiskDetectionsQuery),
    (signins.SPEC, signins.SigninsQuery),
    (directory.SPEC, directory.DirectoryQuery),
    (ueba.SPEC, ueba.UebaQuery),
    (device_processes.SPEC, device_processes.ProcessesQuery),
    (device_logons.SPEC, device_logons.LogonsQuery),
    (device_network.SPEC, device_network.NetworkQuery),
    (device_files.SPEC, device_files.FilesQuery),
    (email.SPEC, email.EmailQuery),
    (url_clicks.SPEC, url_clicks.UrlClicksQuery),
)
EVIDENCE_SPECS: tuple[QuerySpec, ...] = tuple(spec for spec, _ in EVIDENCE)
