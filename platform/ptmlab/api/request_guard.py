"""The API answers only its own origin: an ASGI middleware in front of every route, and the
connection-level deadline `ptmlab serve` gives uvicorn.

A token-less API on loopback is still reachable from any web page the researcher opens: a
cross-site form can POST to it, and DNS rebinding (a name of the attacker's that resolves to
127.0.0.1) makes even reads same-origin for the attacker's page. So, before any route runs:

1. `Host` must be one of the API's own names: loopback names, the bind host, the names in
   PTMLAB_API_ALLOWED_HOSTS (any port); else 421. A rebinding page's requests carry its own name.
2. A write (POST/PUT/PATCH/DELETE) from another site is refused (403): an `Origin` that is not
   this API's own, or `Sec-Fetch-Site: cross-site`. Clients that send no `Origin` (curl, the CLI,
   Python) are not browsers on a foreign page and keep working.
3. With a token set, a write without it is a 401 before its body is read (a stranger learns
   nothing of what the route would accept); so is a read of logs, predictions, attempts or
   configs (`PROTECTED_READS`) when `Settings.reads_need_token` (bound beyond loopback).
4. A write's body must be JSON (415 otherwise): the forms a foreign page can post without a CORS
   preflight are urlencoded, multipart or text/plain, never application/json.
Every answer, refusals included, carries the security headers (`security_headers`).

A middleware rather than route dependencies: dependencies run after FastAPI has read and parsed
the body, and route files are not the place for a policy over all of them.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import re
import socket
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from ptmlab.api.deps import bearer_problem
from ptmlab.api.errors import error_response
from ptmlab.settings import Settings, is_loopback

WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})
# Reads that return what a job wrote or ran with: its log, its attempts (argv, log path, errors),
# its predictions and attack records (artifacts), its resolved config, configs side by side.
PROTECTED_READS = re.compile(
    r"^/api/v1/(jobs/[^/]+/(logs|attempts|predictions|attack-records)|views/jobs/[^/]+|views/compare)/?$"
)

# The dashboard's pages load only their own scripts (web/static, Plotly's bundled copy); the one
# inline script they have is the filter forms' `onsubmit="return false"`, allowed by its hash
# ('unsafe-hashes': an attribute handler, never a <script> block). Styles may be inline: Plotly
# writes style attributes, and a style cannot run code.
INLINE_HANDLERS = ("return false",)
# Plotly's WebGL traces (compression's scattergl past 1,000 points, a study's parallel coordinates)
# compile their shaders' JavaScript with Function(): only those pages allow eval.
WEBGL_PAGES = re.compile(r"^/(compression|studies/[^/]+)/?$")
# FastAPI's API docs pages start Swagger UI / ReDoc from an inline <script> of their own.
DOCS_PAGES = frozenset({"/docs", "/docs/oauth2-redirect", "/redoc"})


def _csp(script_src: str) -> str:
    return "; ".join(
        [
            "default-src 'self'",
            f"script-src {script_src}",
            "style-src 'self' 'unsafe-inline'",
            "img-src 'self' data: blob:",
            "font-src 'self' data:",
            "connect-src 'self'",
            "worker-src 'self' blob:",
            "object-src 'none'",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        ]
    )


def _sha256(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


_PAGE_SCRIPTS = "'self' 'unsafe-hashes' " + " ".join(_sha256(h) for h in INLINE_HANDLERS)
PAGE_CSP = _csp(_PAGE_SCRIPTS)
WEBGL_CSP = _csp(_PAGE_SCRIPTS + " 'unsafe-eval'")
DOCS_CSP = _csp("'self' 'unsafe-inline'")
COMMON_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
]


def security_headers(path: str) -> list[tuple[bytes, bytes]]:
    csp = DOCS_CSP if path in DOCS_PAGES else WEBGL_CSP if WEBGL_PAGES.match(path) else PAGE_CSP
    return [*COMMON_HEADERS, (b"content-security-policy", csp.encode())]


def host_name(host: str) -> str | None:
    """The name in a `Host` header (`name`, `name:port`, `[v6]:port`), lower case; None if malformed."""
    host = host.strip().lower()
    if host.startswith("["):
        name, bracket, port = host[1:].partition("]")
        if not bracket:
            return None
    else:
        name, colon, port = host.partition(":")
        port = colon + port
    if port and not re.fullmatch(r":\d{1,5}", port):
        return None
    return name if re.fullmatch(r"[a-z0-9._:\-]+", name) else None


def is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def allowed_host_names(settings: Settings) -> frozenset[str]:
    names = set(LOOPBACK_NAMES) | set(settings.allowed_host_names)
    bind = settings.bind_host.strip().lower().strip("[]")
    if bind in WILDCARD_HOSTS:
        # Bound to every interface: the machine's own name too (a rebinding attacker cannot make a
        # browser send it; only a page served from this machine under that name can).
        names.add(socket.gethostname().lower())
    else:
        names.add(bind)
    return frozenset(names)


def is_json(media_type: str) -> bool:
    media = media_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


class RequestGuard:
    """The checks above, outermost of the app's middleware; `settings` as the app has them."""

    def __init__(self, app: ASGIApp, settings: Settings):
        self.app = app
        self.hosts = allowed_host_names(settings)
        # Bound to every interface, it is reached by any of the machine's addresses. An IP literal
        # is never a rebinding vector: the browser sent it because it connected to that address.
        self.any_address = settings.bind_host.strip().lower().strip("[]") in WILDCARD_HOSTS
        self.public_names = frozenset(settings.allowed_host_names)
        self.token = settings.api_token
        self.reads_need_token = settings.reads_need_token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        extra = security_headers(scope["path"])

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                message["headers"] = [*message.get("headers", []), *(h for h in extra if h[0] not in present)]
            await send(message)

        refusal = self.refusal(scope)
        app = refusal if refusal is not None else self.app
        await app(scope, receive, send_with_headers)

    def refusal(self, scope: Scope) -> Response | None:
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        name = host_name(host)
        if name is None or not (name in self.hosts or is_loopback(name) or (self.any_address and is_address(name))):
            return error_response(
                "host_not_allowed",
                f"Host {host[:100]!r} is not a name of this API (a DNS "
                "rebinding page's would not be); a name it is served under goes in PTMLAB_API_ALLOWED_HOSTS",
            )
        write = scope["method"] in WRITES
        if write and self.cross_site(headers, host):
            return error_response(
                "cross_site_request",
                f"a {scope['method']} from another site "
                f"(Origin {headers.get('origin', '-')[:100]!r}, Sec-Fetch-Site "
                f"{headers.get('sec-fetch-site', '-')[:30]!r}) is refused",
            )
        if self.token and (write or (self.reads_need_token and PROTECTED_READS.match(scope["path"]))):
            problem = bearer_problem(headers.get("authorization"), self.token)
            if problem is not None:
                return error_response("unauthorized", problem, headers={"WWW-Authenticate": "Bearer"})
        if write and not self.json_or_nothing(headers):
            return error_response(
                "unsupported_media_type",
                f"a {scope['method']} takes an application/json body "
                f"(or none), not {headers.get('content-type', 'a body without a Content-Type')[:100]!r}",
            )
        return None

    def cross_site(self, headers: Headers, host: str) -> bool:
        if headers.get("sec-fetch-site", "").lower() == "cross-site":
            return True
        origin = headers.get("origin")
        if origin is None:
            return False
        parts = urlsplit(origin.strip().lower())
        if parts.scheme not in ("http", "https"):
            return True  # `null` (a sandboxed frame, a file: page) included
        # Same origin: the page's own host:port. Behind a proxy that rewrites Host, the page's public name.
        return parts.netloc != host.strip().lower() and parts.hostname not in self.public_names

    @staticmethod
    def json_or_nothing(headers: Headers) -> bool:
        content_type = headers.get("content-type")
        if content_type is not None:
            return is_json(content_type)
        # No Content-Type: only a body-less write (curl -X POST, the dashboard's cancel and retry).
        return headers.get("content-length", "0").strip() == "0" and "transfer-encoding" not in headers


class ReadDeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on reading each request, headers and body: uvicorn
    waits for a request's headers and body without limit (its keep-alive timeout only starts after
    a response), so a client trickling bytes held a connection open for good. Past the deadline a
    client still sending headers gets a 408 and the connection closes; one still sending a body is
    cut off (the route sees a disconnect)."""

    read_timeout_s: float = 30.0

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._read_deadline = None

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._arm_read_deadline()

    def data_received(self, data: bytes) -> None:
        if self._read_deadline is None:  # the first bytes of the next request on a kept-alive connection
            self._arm_read_deadline()
        super().data_received(data)

    def on_response_complete(self) -> None:
        self._disarm_read_deadline()
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_read_deadline()
        super().connection_lost(exc)

    def _arm_read_deadline(self) -> None:
        self._read_deadline = self.loop.call_later(self.read_timeout_s, self._read_deadline_passed)

    def _disarm_read_deadline(self) -> None:
        if self._read_deadline is not None:
            self._read_deadline.cancel()
            self._read_deadline = None

    def _read_deadline_passed(self) -> None:
        self._read_deadline = None
        if self.transport.is_closing():
            return
        if self.cycle is None or self.cycle.response_complete:  # still sending a request's headers
            body = b'{"error": {"code": "request_timeout", "message": "the request was not sent in time"}}'
            self.transport.write(
                b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
                b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
            )
            self.transport.close()
        elif self.cycle.more_body:  # still sending its body
            self.transport.close()


def read_deadline_protocol(seconds: float) -> type[ReadDeadlineProtocol]:
    """ReadDeadlineProtocol with a deadline of `seconds` (uvicorn takes a class, not an instance)."""
    return type("ReadDeadlineProtocol", (ReadDeadlineProtocol,), {"read_timeout_s": seconds})
