"""ASGI middleware that refuses requests a browser page could forge.

A server in trusted local mode takes the `AgentEnv-Role` header at its word, so any web
page the user opens could drive it: a cross-site form or `fetch` (`text/plain`,
`application/x-www-form-urlencoded` and `multipart/form-data` need no CORS preflight), or
a DNS-rebinding page whose own host name now resolves to 127.0.0.1. Three header checks,
before any body is read, close those doors (docs/security.md):

- **Host** (loopback binds): must name a loopback address (`localhost`, `127.0.0.1`,
  `[::1]`, any port) or the address the connection reached; else 421, as the MCP SDK.
- **Origin** (trusted mode): absent (not a browser) or a loopback origin; else 403.
- **Content-Type** (POST, PUT, PATCH, DELETE): absent, `application/json` or
  `application/*+json`, parameters allowed; else 415.

Answers are in the one REST error shape, as 401 and 413 are, on every path but MCP's: there
it is a JSON-RPC error (id null, as the MCP SDK's own transport errors), which MCP clients
show to their user.
"""

from __future__ import annotations

import json

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentenv.serve import jsonrpc
from agentenv.serve._http import DEFAULT_MAX_BODY, error_fields

LOOPBACK_NAMES = frozenset({b"localhost", b"127.0.0.1", b"[::1]"})
"""Host names a loopback server answers to (any port)."""

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_MCP_END = "/mcp"
_SHOWN = 120  # how much of a hostile header value a message repeats
_KNOWN_HOSTS = 64


def authority_name(authority: bytes) -> bytes | None:
    """The host part of `host[:port]` (IPv6 kept in brackets), lower-cased; None if the
    value is not a well-formed authority (a port that is not a number, a stray `@`)."""
    value = authority.strip().lower()
    if value.startswith(b"["):
        end = value.find(b"]")
        if end < 0:
            return None
        name, rest = value[: end + 1], value[end + 1 :]
    else:
        name, sep, port = value.partition(b":")
        rest = sep + port
    if rest and not (rest[:1] == b":" and rest[1:].isdigit()):
        return None
    if name.endswith(b".") and not name.startswith(b"["):
        name = name[:-1]  # `localhost.`: the fully qualified form of the same name
    if not name or b"@" in name or b"/" in name:
        return None
    return name


# `application/json-rpc` is what some JSON-RPC clients send to the data plane; like every
# non-safelisted type, a browser must ask (CORS preflight) before sending it cross-site.
_JSON_MEDIA = frozenset({b"application/json", b"application/json-rpc"})


def is_json_type(content_type: bytes) -> bool:
    """Whether a Content-Type is JSON: `application/json`, `application/json-rpc` or
    `application/*+json`, any parameters (`; charset=utf-8`)."""
    media = content_type.split(b";", 1)[0].strip().lower()
    if media in _JSON_MEDIA:
        return True
    return media.startswith(b"application/") and media.endswith(b"+json") and len(media) > 17


def _reached(scope: Scope) -> bytes | None:
    # The address the connection reached, as the server reports it (uvicorn: the socket's
    # own address; an in-process transport: its base URL's host, e.g. `testserver`). A
    # rebinding page cannot change it: it names the attacker's domain in Host instead.
    server = scope.get("server")
    if not server or not isinstance(server[0], str):
        return None
    name = server[0].lower()
    return (f"[{name}]" if ":" in name else name).encode("latin-1", "replace")


def local_name(name: bytes | None, scope: Scope) -> bool:
    """Whether a host name (from `authority_name`) is a loopback name or the address the
    connection reached."""
    return name is not None and (name in LOOPBACK_NAMES or name == _reached(scope))


def local_origin(origin: bytes, scope: Scope) -> bool:
    """Whether an `Origin` value names a page on this machine (loopback or the address
    the connection reached); `null` and non-HTTP origins do not."""
    scheme, sep, authority = origin.strip().lower().partition(b"://")
    if not sep or scheme not in (b"http", b"https"):
        return False  # `null` (sandboxed frames, file: pages) and anything odd
    return local_name(authority_name(authority), scope)


def _shown(value: bytes) -> str:
    text = value.decode("latin-1")
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


Refusal = tuple[int, str, str, str]
"""A refusal's HTTP status, error kind, message and hint."""


def host_refusal(host: bytes) -> Refusal:
    """Why a request naming this `Host` is refused (a DNS-rebinding page's Host)."""
    return (
        421,
        "misdirected_host",
        f"Host {_shown(host)!r} is not this server: on loopback it answers only "
        "to localhost, 127.0.0.1 or [::1] (protection against DNS rebinding)",
        "call it as http://127.0.0.1:PORT; a reverse proxy in front of it must send "
        "one of those names as Host",
    )


def origin_refusal(origin: bytes) -> Refusal:
    """Why a request from this web page `Origin` is refused in trusted local mode."""
    return (
        403,
        "foreign_origin",
        f"requests from the web page origin {_shown(origin)!r} are refused: in "
        "trusted local mode only pages on localhost may call this server",
        "to serve clients elsewhere, run with --token ROLE=SECRET and send "
        "Authorization: Bearer <secret>",
    )


class RequestGuard:
    """Refuses cross-site and DNS-rebinding requests before they reach a route.

    `loopback` and `trusted` (a loopback bind in trusted local mode, no tokens): `Host` is
    checked and foreign `Origin`s are refused. With tokens the bearer is what protects: a
    page has none, and a reverse proxy may pass on its own `Host`. Header scan only: no body is
    read, nothing is parsed unless a header is wrong.
    """

    def __init__(self, app: ASGIApp, *, loopback: bool = True, trusted: bool = True) -> None:
        self.app = app
        self.loopback = loopback
        self.trusted = trusted
        # Host values already seen to name a loopback address (`127.0.0.1:8765`): the
        # common case is one set lookup. Bounded: a client cycling ports cannot grow it.
        self._loopback_hosts: set[bytes] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self.refusal(scope)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def refusal(self, scope: Scope) -> Response | None:
        """The answer that refuses this request, or None to let it through."""
        bad_host = bad_origin = bad_type = None
        check_type = scope["method"] in _BODY_METHODS
        for name, value in scope["headers"]:
            if name == b"host":
                # Rebinding matters only where the role header is taken at its word: with
                # tokens a page has no bearer, and proxies may send their own Host.
                if self.loopback and self.trusted and value not in self._loopback_hosts:
                    host = authority_name(value)
                    if host in LOOPBACK_NAMES:
                        if len(self._loopback_hosts) < _KNOWN_HOSTS:
                            self._loopback_hosts.add(value)
                    elif host is None or host != _reached(scope):
                        bad_host = bad_host or value
            elif name == b"origin":
                if self.trusted and not local_origin(value, scope):
                    bad_origin = bad_origin or value
            elif (
                name == b"content-type"
                and check_type
                and value != b"application/json"
                and not is_json_type(value)
            ):
                bad_type = bad_type or value
        if bad_host is not None:
            return _refuse(scope, *host_refusal(bad_host))
        if bad_origin is not None:
            return _refuse(scope, *origin_refusal(bad_origin))
        if bad_type is not None:
            return _refuse(
                scope,
                415,
                "unsupported_media_type",
                f"Content-Type {_shown(bad_type)!r} is not JSON: this server reads "
                "application/json (or application/*+json) bodies only",
                "send Content-Type: application/json (curl: --json, or "
                "-H 'Content-Type: application/json'; -d alone sends a form)",
            )
        return None


def _refuse(scope: Scope, status: int, kind: str, message: str, hint: str) -> Response:
    body: object
    if scope["path"].endswith(_MCP_END):
        body = jsonrpc.error(None, jsonrpc.INVALID_REQUEST, message, kind)
        body["error"]["data"]["hint"] = hint
    else:
        body = {"ok": False, "error": error_fields(kind, message, hint=hint)}
    return Response(json.dumps(body), status_code=status, media_type="application/json")


class _TooLarge(Exception):
    pass


class BodyLimit:
    """ASGI middleware: answer 413 to request bodies over `max_bytes`, declared or streamed.

    Starlette's own RequestBodyLimitMiddleware answers plain text for declared lengths;
    ours answers in the one error shape of this API (JSON-RPC at `/mcp`, so MCP clients
    show the message).
    """

    def __init__(self, app: ASGIApp, max_bytes: int = DEFAULT_MAX_BODY) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    too_big = int(value) > self.max_bytes
                except ValueError:
                    too_big = False
                if too_big:
                    await self._reject(scope, receive, send)
                    return
        seen = 0
        started = False

        async def counted_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise _TooLarge
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except _TooLarge:
            if not started:
                await self._reject(scope, receive, send)

    async def _reject(self, scope: Scope, receive: Receive, send: Send) -> None:
        await too_large(scope, self.max_bytes)(scope, receive, send)


def too_large(scope: Scope, max_bytes: int) -> Response:
    """The 413 answer to a body over `max_bytes` (JSON-RPC at `/mcp`, else the REST shape)."""
    message = f"request body over the limit of {max_bytes} bytes"
    hint = "send less, or start the server with a larger body limit"
    return _refuse(scope, 413, "too_large", message, hint)
