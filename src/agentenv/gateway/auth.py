"""Who a request is from: credentials to Principal.

Two modes. In *trusted local* mode (the default when the server listens on loopback and
no token is configured) the `AgentEnv-Role` header names the role and every caller may use
the control plane, as on a developer's laptop. No header, a blank one or the protocol's
`default` ("no role forwarded") is the environment's default role. Once tokens are configured, or the server
listens beyond loopback, only `Authorization: Bearer <token>` counts: the token's role is
the caller's role, the role header grants nothing, and only `admin` tokens reach the
control plane.

Some role names are reserved (`RESERVED_ROLES`): `system` is the gateway's own principal,
the one trigger actions and control operations run as, and it passes every access rule.
No caller may name one, by header, by MCP `_meta`, by token or as the default role: every
role a caller names passes through `resolve_role`, which refuses them.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Mapping

from agentenv.env.tool import SYSTEM, Principal

ADMIN_ROLE = "admin"
DEFAULT_ROLE = "default"
"""The protocol's role of a caller that names none: the environment's default role."""
RESERVED_ROLES: frozenset[str] = frozenset({SYSTEM.role})
"""Role names no caller may act as. Matched exactly after trimming, as roles are compared
everywhere else (`System` is an ordinary role: nothing treats it as the gateway's)."""


class AuthError(Exception):
    """Missing or unknown credentials, or a role no caller may take."""


def reserved_role_message(role: str) -> str:
    """Why a caller may not act as `role` (one of `RESERVED_ROLES`)."""
    return f"the role {role!r} is reserved for the gateway itself; pick another"


def is_loopback(host: str) -> bool:
    """Whether a listen address only accepts local connections."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Authenticator:
    """Maps a request's credentials to a Principal."""

    def __init__(
        self,
        tokens: Mapping[str, str] | None = None,
        *,
        trusted_local: bool = True,
        default_role: str = "default",
    ) -> None:
        """`tokens` maps secret -> role. `trusted_local` is ignored once tokens exist.
        A reserved role, for a token or as the default, is a ValueError."""
        for role in [*(tokens or {}).values(), default_role]:
            if role.strip() in RESERVED_ROLES:
                raise ValueError(reserved_role_message(role.strip()))
        self._tokens = dict(tokens or {})
        self.trusted = trusted_local and not self._tokens
        self.default_role = default_role

    @classmethod
    def for_host(
        cls, host: str, tokens: Mapping[str, str] | None = None, default_role: str = "default"
    ) -> Authenticator:
        """The authenticator a server on `host` gets by default."""
        return cls(tokens, trusted_local=is_loopback(host), default_role=default_role)

    def principal(self, role_header: str | None, authorization: str | None) -> Principal:
        """The caller, from the role header and the Authorization header."""
        if self.trusted:
            return Principal(role=self.resolve_role(role_header), admin=True)
        if not authorization or not authorization.lower().startswith("bearer "):
            raise AuthError("a bearer token is required (Authorization: Bearer <token>)")
        secret = authorization[7:].strip()
        for known, role in self._tokens.items():
            if hmac.compare_digest(known.encode(), secret.encode()):
                acting = self.resolve_role(role)
                return Principal(role=acting, name=f"token:{role}", admin=role == ADMIN_ROLE)
        raise AuthError("unknown bearer token")

    def resolve_role(self, value: object) -> str:
        """A role as a caller named it (a header, an MCP `_meta` entry, a token's role):
        trimmed; nothing, blank or the protocol's `default` is the environment's default
        role. A reserved role (`RESERVED_ROLES`) is an AuthError: this is the one place
        every caller-named role passes, so it is the one place they are refused."""
        if not isinstance(value, str):
            return self.default_role
        role = value.strip()
        if role in RESERVED_ROLES:
            raise AuthError(reserved_role_message(role))
        return self.default_role if role in ("", DEFAULT_ROLE) else role


def parse_tokens(items: list[str]) -> dict[str, str]:
    """`["agent=s3cret", ...]` (ROLE=SECRET) to {secret: role}."""
    tokens: dict[str, str] = {}
    for item in items:
        role, sep, secret = item.partition("=")
        if not sep or not role or not secret:
            raise ValueError(f"expected ROLE=SECRET, got {item!r}")
        if role.strip() in RESERVED_ROLES:
            raise ValueError(reserved_role_message(role.strip()))
        if secret in tokens:
            raise ValueError(f"the same secret is given for {tokens[secret]!r} and {role!r}")
        tokens[secret] = role
    return tokens
