"""A fake of the identity services the bot talks to, on 127.0.0.1, speaking their real protocols:

- the Bot Framework's OpenID metadata (``/v1/.well-known/openidconfiguration``) and signing keys (JWKS, with
  channel endorsements), and channel tokens signed with its own RSA key (``channel_token``);
- the Entra token endpoint (``POST /{tenant}/oauth2/v2.0/token``, client credentials grant);
- Microsoft Graph's ``POST /v1.0/directoryObjects/{id}/checkMemberGroups`` (answered from ``members``, only for a
  token the fake issued);
- the on-behalf-of grant (``grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer``,
  ``requested_token_use=on_behalf_of``): the user's single sign-on token (``sso_token``) in, a token for the scope's
  resource naming that user out (``user_of`` reads it back, for the resource fakes). Expired or ``revoked`` sign-ins
  get ``invalid_grant``; users in ``needs_consent`` get AADSTS65001, in ``needs_mfa`` AADSTS50076.
  azure-identity sends bearer requests to HTTPS authorities only: ``FakeEntra(tls=True)`` serves HTTPS from a
  throwaway CA (``transport()`` trusts it).

The metadata can be made to hang (``hang_metadata``) or fail (``fail_metadata``); every request is counted.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import secrets
import ssl
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import jwt
import trustme
from aiohttp import web
from azure.core.pipeline.transport import AioHttpTransport
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import RSAAlgorithm

from tests.support.connector_fake import TENANT
from tests.support.serving import serve

CHANNEL_ISSUER = "https://api.botframework.com"
APP_ID = "5f0b9a9e-1c2d-4e3f-8a9b-0c1d2e3f4a5b"
KID = "fake-key-1"
SSO_APP_ID = "9a7c5e3b-2d4f-4a6b-8c9d-0e1f2a3b4c5d"  # the app registration Teams single sign-on issues tokens to
SSO_RESOURCE = f"api://botid-{APP_ID}"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
__all__ = ["APP_ID", "CHANNEL_ISSUER", "KID", "SSO_APP_ID", "SSO_RESOURCE", "TENANT", "FakeEntra", "forged_headers",
           "new_key"]


def new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@dataclass
class FakeEntra:
    endorsements: tuple[str, ...] = ("msteams", "emulator", "webchat")
    members: dict[str, set[str]] = field(default_factory=dict)  # user object id -> group ids (transitive)
    hang_metadata: bool = False
    fail_metadata: bool = False
    graph_status: int = 200  # answer Graph with this status (e.g. 503) when not 200
    requests: Counter[str] = field(default_factory=Counter)
    url: str = ""
    tls: bool = False
    revoked: set[str] = field(default_factory=set)  # user object ids whose sign-in was revoked
    needs_consent: set[str] = field(default_factory=set)  # user object ids whose tenant has not consented
    needs_mfa: set[str] = field(default_factory=set)  # user object ids a Conditional Access policy challenges
    obo_latency_s: float = 0.0
    on_behalf_of: list[tuple[str, str]] = field(default_factory=list)  # (user object id, scope) per OBO grant
    client_assertions: list[str] = field(default_factory=list)  # what OBO requests authenticated the app with

    def __post_init__(self) -> None:
        self.key = new_key()
        self._ssl: ssl.SSLContext | None = None
        self.ca_file = ""
        if self.tls:
            ca = trustme.CA()
            self._ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ca.issue_cert("127.0.0.1", "localhost").configure_cert(self._ssl)
            with tempfile.NamedTemporaryFile("wb", suffix=".pem", delete=False) as pem:
                pem.write(ca.cert_pem.bytes())
            self.ca_file = pem.name
        self._tokens: set[str] = set()
        self._runner: web.AppRunner | None = None
        self._release = asyncio.Event()

    @property
    def metadata_url(self) -> str:
        return f"{self.url}/v1/.well-known/openidconfiguration"

    async def start(self) -> FakeEntra:
        app = web.Application()
        app.router.add_get("/v1/.well-known/openidconfiguration", self._metadata)
        app.router.add_get("/v1/.well-known/keys", self._keys)
        app.router.add_post("/{tenant}/oauth2/v2.0/token", self._token)
        app.router.add_post("/v1.0/directoryObjects/{id}/checkMemberGroups", self._check_member_groups)
        self._runner, port = await serve(app, shutdown_timeout=0.2, access_log=None, ssl_context=self._ssl)
        self.url = f"{'https' if self.tls else 'http'}://127.0.0.1:{port}"
        return self

    def transport(self) -> AioHttpTransport:
        """An azure-core transport trusting the fake's CA (``tls=True``)."""
        context = ssl.create_default_context(cafile=self.ca_file)
        return AioHttpTransport(session=aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)),
                                session_owner=True)

    async def stop(self) -> None:
        self._release.set()  # hung requests end, so the server can stop
        if self._runner is not None:
            await self._runner.cleanup()

    # ---- tokens the tests send --------------------------------------------------------------------------------

    def channel_token(self, service_url: str, *, key: Any = None, kid: str = KID, algorithm: str = "RS256",
                      lifetime_s: int = 3600, not_before_s: int = -60, drop: tuple[str, ...] = (),
                      headers: dict[str, Any] | None = None, **claims: Any) -> str:
        """A Bot Framework channel token for this bot; keyword claims override or add (``iss``, ``aud``...)."""
        now = int(time.time())
        body = {"iss": CHANNEL_ISSUER, "aud": APP_ID, "serviceurl": service_url, "nbf": now + not_before_s,
                "exp": now + lifetime_s, "iat": now} | claims
        for name in drop:
            body.pop(name, None)
        return jwt.encode(body, key if key is not None else self.key, algorithm=algorithm,
                          headers={"kid": kid} | (headers or {}))

    def sso_token(self, user: str, *, tenant: str = TENANT, lifetime_s: int = 3600, **claims: Any) -> str:
        """The token Teams single sign-on gets for the bot's API, for user object id ``user``."""
        now = int(time.time())
        body = {"iss": f"https://login.microsoftonline.com/{tenant}/v2.0", "aud": SSO_APP_ID, "oid": user,
                "tid": tenant, "upn": f"{user}@contoso.example", "scp": "access_as_user", "nbf": now - 60,
                "iat": now - 60, "exp": now + lifetime_s, "jti": secrets.token_hex(8)} | claims
        return jwt.encode(body, self.key, algorithm="RS256", headers={"kid": KID})

    def user_of(self, bearer: str, audience: str | None = None) -> str | None:
        """The user object id an access token the fake issued names (None for anything else, or expired)."""
        try:
            claims = jwt.decode(bearer, self.key.public_key(), algorithms=["RS256"],
                                options={"verify_aud": False})
        except jwt.PyJWTError:
            return None
        if claims.get("idtyp") != "user" or (audience is not None and claims.get("aud") != audience):
            return None
        return str(claims.get("oid"))

    def user_of_sso(self, token: str) -> str | None:
        """The user a single sign-on token the fake issued names, while it is valid (the token service's check)."""
        try:
            return str(jwt.decode(token, self.key.public_key(), algorithms=["RS256"], audience=SSO_APP_ID)["oid"])
        except (jwt.PyJWTError, KeyError):
            return None

    # ---- handlers ---------------------------------------------------------------------------------------------

    async def _metadata(self, request: web.Request) -> web.Response:
        self.requests["metadata"] += 1
        if self.hang_metadata:
            await self._release.wait()
        if self.fail_metadata:
            return web.Response(status=500)
        return web.json_response({"issuer": CHANNEL_ISSUER, "jwks_uri": f"{self.url}/v1/.well-known/keys",
                                  "id_token_signing_alg_values_supported": ["RS256"]})

    async def _keys(self, request: web.Request) -> web.Response:
        self.requests["keys"] += 1
        jwk = json.loads(RSAAlgorithm.to_jwk(self.key.public_key())) | {
            "kid": KID, "use": "sig", "endorsements": list(self.endorsements)}
        return web.json_response({"keys": [jwk]})

    async def _token(self, request: web.Request) -> web.Response:
        self.requests["token"] += 1
        form = await request.post()
        if form.get("grant_type") == JWT_BEARER:
            return await self._on_behalf_of(form, request.match_info["tenant"])
        if form.get("grant_type") != "client_credentials" or not form.get("client_id"):
            return web.json_response({"error": "invalid_request"}, status=400)
        token = secrets.token_urlsafe(24)
        self._tokens.add(token)
        return web.json_response({"token_type": "Bearer", "expires_in": 3599, "access_token": token})

    async def _on_behalf_of(self, form: Any, tenant: str) -> web.Response:
        """The OAuth 2.0 on-behalf-of grant, with Entra's error bodies (AADSTS codes in error_description)."""
        self.requests["obo"] += 1
        if self.obo_latency_s:
            await asyncio.sleep(self.obo_latency_s)
        if form.get("client_assertion"):
            self.client_assertions.append(str(form.get("client_assertion")))
        has_credential = form.get("client_secret") or form.get("client_assertion")
        if form.get("requested_token_use") != "on_behalf_of" or form.get("client_id") != SSO_APP_ID \
                or not has_credential:
            return _entra_error(400, "invalid_client", "AADSTS7000215: Invalid client credentials.")
        try:
            claims = jwt.decode(str(form.get("assertion") or ""), self.key.public_key(), algorithms=["RS256"],
                                audience=SSO_APP_ID)
        except jwt.ExpiredSignatureError:
            return _entra_error(400, "invalid_grant", "AADSTS500133: Assertion is not within its valid time range.")
        except jwt.PyJWTError:
            return _entra_error(400, "invalid_grant", "AADSTS50013: Assertion failed signature validation.")
        user = str(claims.get("oid"))
        if user in self.revoked:
            return _entra_error(400, "invalid_grant", "AADSTS50173: The provided grant has expired due to it being "
                                "revoked, a fresh auth token is needed.")
        if user in self.needs_consent:
            return _entra_error(400, "invalid_grant", "AADSTS65001: The user or administrator has not consented to "
                                "use the application.", suberror="consent_required")
        if user in self.needs_mfa:
            return _entra_error(400, "interaction_required", "AADSTS50076: Due to a configuration change made by "
                                "your administrator, you must use multi-factor authentication.")
        scope = str(form.get("scope") or "").split()
        resource = next((s.removesuffix("/.default") for s in scope if s.endswith("/.default")), "")
        self.on_behalf_of.append((user, resource))
        now = int(time.time())
        token = jwt.encode({"aud": resource, "oid": user, "tid": tenant, "upn": claims.get("upn"), "idtyp": "user",
                            "scp": "user_impersonation", "iat": now, "exp": now + 3600, "jti": secrets.token_hex(8)},
                           self.key, algorithm="RS256", headers={"kid": KID})
        return web.json_response({"token_type": "Bearer", "scope": " ".join(scope), "expires_in": 3599,
                                  "ext_expires_in": 3599, "access_token": token})

    async def _check_member_groups(self, request: web.Request) -> web.Response:
        self.requests["graph"] += 1
        if request.headers.get("Authorization", "").removeprefix("Bearer ") not in self._tokens:
            return web.json_response({"error": {"code": "InvalidAuthenticationToken"}}, status=401)
        if self.graph_status != 200:
            return web.json_response({"error": {"code": "ServiceUnavailable"}}, status=self.graph_status)
        asked = (await request.json()).get("groupIds") or []
        groups = self.members.get(request.match_info["id"], set())
        return web.json_response({"value": [g for g in asked if g in groups]})


def _entra_error(status: int, error: str, description: str, suberror: str | None = None) -> web.Response:
    body = {"error": error, "error_description": description, "error_codes": [int(description[6:].split(":")[0])],
            "timestamp": time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime()), "trace_id": secrets.token_hex(8)}
    return web.json_response(body | ({"suberror": suberror} if suberror else {}), status=status)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _hand_made(header: dict[str, Any], claims: dict[str, Any], signature: bytes) -> str:
    return ".".join((_b64(json.dumps(header).encode()), _b64(json.dumps(claims).encode()), _b64(signature)))


def forged_headers(fake: FakeEntra, service_url: str) -> list[tuple[str, str]]:
    """(name, Authorization header) for requests that must all be refused with 401: missing or malformed
    tokens, wrong algorithms and keys, and well-signed tokens with a wrong claim."""
    now = int(time.time())
    good = {"iss": CHANNEL_ISSUER, "aud": APP_ID, "serviceurl": service_url, "nbf": now - 60, "exp": now + 3600}
    foreign = new_key()
    public_pem = fake.key.public_key().public_bytes(serialization.Encoding.PEM,
                                                    serialization.PublicFormat.SubjectPublicKeyInfo)
    signed = fake.channel_token(service_url)
    head, payload, _ = signed.split(".")
    tampered_claims = good | {"aud": "00000000-0000-0000-0000-000000000000"}
    ec_key = ec.generate_private_key(ec.SECP256R1())
    bearer = {
        "alg none": jwt.encode(good, None, algorithm="none", headers={"kid": KID}),
        "HS256 with a guessed secret": jwt.encode(good, "secret-secret-secret-secret-32b!", algorithm="HS256",
                                                  headers={"kid": KID}),
        "HS256 keyed with the public key": _hand_made(
            {"alg": "HS256", "typ": "JWT", "kid": KID}, good,
            hmac.new(public_pem, f"{head}.{payload}".encode(), hashlib.sha256).digest()),
        "RS256 with a foreign key": fake.channel_token(service_url, key=foreign),
        "RS256 with a foreign key and its own kid": fake.channel_token(service_url, key=foreign, kid="attacker"),
        "RS512": fake.channel_token(service_url, algorithm="RS512"),
        "PS256": fake.channel_token(service_url, algorithm="PS256"),
        "ES256 with a foreign key": jwt.encode(good, ec_key, algorithm="ES256", headers={"kid": KID}),
        "no kid": jwt.encode(good, fake.key, algorithm="RS256"),
        "kid path": fake.channel_token(service_url, kid="../../../etc/passwd"),
        "signature stripped": f"{head}.{payload}.",
        "payload tampered": f"{head}.{_b64(json.dumps(tampered_claims).encode())}.{signed.split('.')[2]}",
        "wrong audience": fake.channel_token(service_url, aud="00000000-0000-0000-0000-000000000000"),
        "audience list without the bot": fake.channel_token(service_url, aud=["someone-else"]),
        "wrong issuer": fake.channel_token(service_url, iss="https://sts.windows.net/attacker/"),
        "issuer with a trailing slash": fake.channel_token(service_url, iss=CHANNEL_ISSUER + "/"),
        "another tenant": fake.channel_token(service_url, tid="00000000-0000-0000-0000-00000000bad0"),
        "expired": fake.channel_token(service_url, lifetime_s=-3600, not_before_s=-7200),
        "not yet valid": fake.channel_token(service_url, not_before_s=3600, lifetime_s=7200),
        "no expiry": fake.channel_token(service_url, drop=("exp",)),
        "no audience": fake.channel_token(service_url, drop=("aud",)),
        "another serviceUrl": fake.channel_token(service_url, serviceurl="https://evil.example/"),
        "no serviceUrl": fake.channel_token(service_url, drop=("serviceurl",)),
        "expiry not a number": fake.channel_token(service_url, exp="tomorrow"),
        "three dots of garbage": "abc.def.ghi",
        "random bytes": _b64(secrets.token_bytes(600)),
    }
    headers = [("no header", ""), ("empty bearer", "Bearer "), ("basic scheme", "Basic dXNlcjpwYXNz"),
               ("token without a scheme", signed)]
    return headers + [(name, f"Bearer {token}") for name, token in bearer.items()]
