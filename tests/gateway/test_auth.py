"""Who a request is from: trusted local mode and bearer tokens."""

from __future__ import annotations

import pytest

from agentenv import SYSTEM, Principal
from agentenv.gateway import ADMIN_ROLE, Authenticator, AuthError, is_loopback, parse_tokens
from agentenv.gateway.auth import RESERVED_ROLES


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost", True),
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.10", False),
        ("example.com", False),
        ("", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


# -- trusted local mode ----------------------------------------------------------------------


def test_trusted_local_mode_takes_the_role_from_the_header() -> None:
    auth = Authenticator()
    assert auth.trusted
    assert auth.principal("supervisor", None) == Principal("supervisor", admin=True)
    # A bearer header is not needed, and not looked at.
    assert auth.principal("agent", "Bearer whatever").role == "agent"


@pytest.mark.parametrize("header", [None, "", "   "])
def test_trusted_local_mode_falls_back_to_the_default_role(header: str | None) -> None:
    assert Authenticator(default_role="agent").principal(header, None).role == "agent"
    assert Authenticator().principal(header, None).role == "default"


def test_the_header_is_trimmed() -> None:
    assert Authenticator().principal("  agent ", None).role == "agent"


@pytest.mark.parametrize("header", ["default", " default "])
def test_the_protocols_default_role_is_the_environments_default_role(header: str) -> None:
    # `default` is what a gateway sends when it has no role to forward.
    assert Authenticator(default_role="agent").principal(header, None).role == "agent"


@pytest.mark.parametrize(
    ("value", "role"),
    [(None, "agent"), ("", "agent"), ("default", "agent"), (7, "agent"), (" boss ", "boss")],
)
def test_resolve_role(value: object, role: str) -> None:
    assert Authenticator(default_role="agent").resolve_role(value) == role


# -- reserved roles --------------------------------------------------------------------------


def test_system_is_the_one_reserved_role() -> None:
    # The gateway's own principal (triggers, control operations) passes every access rule.
    assert RESERVED_ROLES == {SYSTEM.role} == {"system"}


@pytest.mark.parametrize("value", ["system", " system ", "\tsystem\n"])
def test_a_reserved_role_is_refused_wherever_a_caller_names_it(value: str) -> None:
    auth = Authenticator(default_role="agent")
    # As an MCP `_meta` entry or any other caller-named role ...
    with pytest.raises(AuthError, match="'system' is reserved"):
        auth.resolve_role(value)
    # ... and as the role header in trusted mode.
    with pytest.raises(AuthError, match="'system' is reserved"):
        auth.principal(value, None)


@pytest.mark.parametrize("role", ["System", "SYSTEM", "systems", "system-agent"])
def test_names_near_system_are_ordinary_roles(role: str) -> None:
    # Roles are compared exactly everywhere: nothing treats these as the gateway's own.
    assert Authenticator().resolve_role(role) == role


def test_a_reserved_role_cannot_be_a_tokens_role_or_the_default() -> None:
    with pytest.raises(ValueError, match="'system' is reserved"):
        Authenticator({"s3cret": "system"})
    with pytest.raises(ValueError, match="'system' is reserved"):
        Authenticator({"s3cret": " system "})
    with pytest.raises(ValueError, match="'system' is reserved"):
        Authenticator(default_role="system")
    with pytest.raises(ValueError, match="'system' is reserved"):
        parse_tokens(["system=s3cret"])


def test_with_tokens_a_reserved_role_header_grants_nothing_and_is_not_looked_at() -> None:
    auth = Authenticator({"s3cret": "agent"})
    assert auth.principal("system", "Bearer s3cret").role == "agent"


def test_a_token_for_default_acts_as_the_default_role() -> None:
    auth = Authenticator({"s": "default"}, default_role="agent")
    assert auth.principal(None, "Bearer s") == Principal("agent", name="token:default")


def test_for_host_is_trusted_only_on_loopback() -> None:
    assert Authenticator.for_host("127.0.0.1").trusted
    assert Authenticator.for_host("localhost", default_role="x").default_role == "x"
    assert not Authenticator.for_host("0.0.0.0").trusted
    assert not Authenticator.for_host("127.0.0.1", {"s3cret": "agent"}).trusted


def test_without_trust_and_without_tokens_nobody_gets_in() -> None:
    auth = Authenticator.for_host("0.0.0.0")
    with pytest.raises(AuthError, match="a bearer token is required"):
        auth.principal("agent", None)
    with pytest.raises(AuthError, match="unknown bearer token"):
        auth.principal("agent", "Bearer anything")


# -- token mode ------------------------------------------------------------------------------

TOKENS = {"agent-secret": "agent", "boss-secret": ADMIN_ROLE, "sup-secret": "supervisor"}


@pytest.fixture
def auth() -> Authenticator:
    return Authenticator(TOKENS, trusted_local=True)  # tokens switch trusted mode off


def test_tokens_switch_trusted_mode_off(auth: Authenticator) -> None:
    assert not auth.trusted


def test_the_token_gives_the_role_and_the_header_is_ignored(auth: Authenticator) -> None:
    who = auth.principal("supervisor", "Bearer agent-secret")
    assert who == Principal("agent", name="token:agent", admin=False)
    assert auth.principal(None, "Bearer sup-secret").role == "supervisor"


def test_only_admin_tokens_reach_the_control_plane(auth: Authenticator) -> None:
    assert auth.principal(None, "Bearer boss-secret") == Principal(
        ADMIN_ROLE, name="token:admin", admin=True
    )
    assert not auth.principal(ADMIN_ROLE, "Bearer sup-secret").admin


@pytest.mark.parametrize(
    "authorization",
    ["bearer agent-secret", "BEARER agent-secret", "Bearer   agent-secret  "],
)
def test_the_scheme_is_case_insensitive_and_the_token_trimmed(
    auth: Authenticator, authorization: str
) -> None:
    assert auth.principal(None, authorization).role == "agent"


@pytest.mark.parametrize(
    ("authorization", "message"),
    [
        (None, "a bearer token is required"),
        ("", "a bearer token is required"),
        ("agent-secret", "a bearer token is required"),
        ("Basic YWdlbnQ6c2VjcmV0", "a bearer token is required"),
        ("Bearer", "a bearer token is required"),
        ("Bearer wrong", "unknown bearer token"),
        ("Bearer agent-secret-but-longer", "unknown bearer token"),
        ("Bearer AGENT-SECRET", "unknown bearer token"),
        ("Bearer ", "unknown bearer token"),
    ],
)
def test_missing_or_unknown_credentials(
    auth: Authenticator, authorization: str | None, message: str
) -> None:
    with pytest.raises(AuthError, match=message):
        auth.principal("admin", authorization)


def test_a_non_ascii_token_is_just_unknown(auth: Authenticator) -> None:
    with pytest.raises(AuthError, match="unknown bearer token"):
        auth.principal(None, "Bearer sécret")


# -- parse_tokens ----------------------------------------------------------------------------


def test_parse_tokens() -> None:
    assert parse_tokens([]) == {}
    assert parse_tokens(["agent=s3cret", "admin=r00t"]) == {"s3cret": "agent", "r00t": "admin"}
    # Only the first `=` separates: a secret may contain more.
    assert parse_tokens(["agent=a=b=c"]) == {"a=b=c": "agent"}


@pytest.mark.parametrize("item", ["agent", "=secret", "agent=", "", "="])
def test_parse_tokens_errors(item: str) -> None:
    with pytest.raises(ValueError, match=f"expected ROLE=SECRET, got {item!r}"):
        parse_tokens(["ok=fine", item])


def test_parsed_tokens_work_in_an_authenticator() -> None:
    auth = Authenticator(parse_tokens(["agent=tok-1", "admin=tok-2"]))
    assert auth.principal(None, "Bearer tok-1").role == "agent"
    assert auth.principal(None, "Bearer tok-2").admin
