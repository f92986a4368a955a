"""The WebSocket handshake's cross-site and DNS-rebinding checks.

`serve._guard.RequestGuard` checks HTTP requests only: a WebSocket handshake is an ASGI
`websocket` scope, which it lets through untouched. A browser page may open a WebSocket to
any address without a CORS preflight, so in trusted local mode (the role taken at its
word) a page the user opens could drive the server over `/ws` exactly as it could over a
cross-site form. Browsers always send `Origin` on a WebSocket handshake, so the same two
header checks close that door:

- **Host** (loopback bind, trusted mode): a loopback name (`localhost`, `127.0.0.1`,
  `[::1]`, any port) or the address the connection reached; else 421.
- **Origin** (trusted mode): absent (not a browser) or a loopback origin; else 403.

The verdicts and messages are RequestGuard's; they are written again here, not imported,
because that module's helpers are private and being reworked for speed (issue 12). A test
(`tests/serve/test_ws.py`) sends the same headers to both and checks that they agree.
"""

from __future__ import annotations

from starlette.types import Scope

LOOPBACK_NAMES = frozenset({b"localhost", b"127.0.0.1", b"[::1]"})
"""Host names a loopback server answers to (any port)."""

_SHOWN = 120  # how much of a hostile header value a message repeats


class Refusal:
    """Why a handshake is refused: the HTTP status and the error fields of its answer."""

    __slots__ = ("hint", "kind", "message", "status")

    def __init__(self, status: int, kind: str, message: str, hint: str) -> None:
        self.status = status
        self.kind = kind
        self.message = message
        self.hint = hint


def _authority_name(authority: bytes) -> bytes | None:
    # The host part of `host[:port]` (IPv6 kept in brackets), lower-cased; None if the
    # value is not a well-formed authority (a port that is not a number, a stray `@`).
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


def _reached(scope: Scope) -> bytes | None:
    # The address the connection reached, as the server reports it; a rebinding page
    # cannot change it (it names the attacker's domain in Host instead).
    server = scope.get("server")
    if not server or not isinstance(server[0], str):
        return None
    name = server[0].lower()
    return (f"[{name}]" if ":" in name else name).encode("latin-1", "replace")


def _local_name(name: bytes | None, scope: Scope) -> bool:
    return name is not None and (name in LOOPBACK_NAMES or name == _reached(scope))


def _local_origin(origin: bytes, scope: Scope) -> bool:
    scheme, sep, authority = origin.strip().lower().partition(b"://")
    if not sep or scheme not in (b"http", b"https"):
        return False  # `null` (sandboxed frames, file: pages) and anything odd
    return _local_name(_authority_name(authority), scope)


def _shown(value: bytes) -> str:
    text = value.decode("latin-1")
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


def handshake_refusal(scope: Scope, *, loopback: bool, trusted: bool) -> Refusal | None:
    """Why this handshake must be refused (Host, then Origin), or None to let it in."""
    if not trusted:
        return None  # with tokens the bearer protects: a page has none
    bad_host = bad_origin = None
    for name, value in scope["headers"]:
        if name == b"host":
            if loopback and not _local_name(_authority_name(value), scope):
                bad_host = bad_host or value
        elif name == b"origin" and not _local_origin(value, scope):
            bad_origin = bad_origin or value
    if bad_host is not None:
        return Refusal(
            421,
            "misdirected_host",
            f"Host {_shown(bad_host)!r} is not this server: on loopback it answers only "
            "to localhost, 127.0.0.1 or [::1] (protection against DNS rebinding)",
            "call it as http://127.0.0.1:PORT; a reverse proxy in front of it must send "
            "one of those names as Host",
        )
    if bad_origin is not None:
        return Refusal(
            403,
            "foreign_origin",
            f"requests from the web page origin {_shown(bad_origin)!r} are refused: in "
            "trusted local mode only pages on localhost may call this server",
            "to serve clients elsewhere, run with --token ROLE=SECRET and send "
            "Authorization: Bearer <secret>",
        )
    return None
