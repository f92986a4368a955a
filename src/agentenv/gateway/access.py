"""Tool access (RBAC): which role may call which tool, changeable at run time.

Rules are looked up for the caller's role, then for the wildcard role `*`; for each, a
rule about the tool is taken before a `prefix*` rule (the longest; `email__*` covers a
composed child's tools), before a rule about `*` (all tools). With no rule (or an
enable of `*`, which lifts disables but grants nothing), a tool is allowed unless it
declares roles and the caller's is not among them; enabling a tool by name grants it.

A tool hidden by default (`hidden_by_default`, listed with the protocol's
`_meta {"agentenv.io/hiddenByDefault": true}`) skips `*` and `prefix*` rules: it stays
hidden from every role until a rule names it.

Rules take any role string, declared or not (the gateway decides whether undeclared roles
may call at all). The role `default` is the protocol's "no role forwarded": its rules
apply to callers in the environment's default role, after that role's own rules. A rule
for the role `*` about some tools is also written into every role's rules, and `*` for
`*` starts over with that one rule, as the protocol's gateways do. The system principal
passes every rule: trigger actions and control operations are not agents.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from agentenv.env.tool import SYSTEM, Tool
from agentenv.spec.environment import AccessRuleSpec

WILDCARD = "*"
DEFAULT_ROLE = "default"
"""The protocol's role of a caller that names none (a gateway's unforwarded role)."""


class AccessControl:
    """The tool-access rules of one instance."""

    def __init__(
        self,
        rules: Iterable[AccessRuleSpec] = (),
        *,
        default_role: str = DEFAULT_ROLE,
        hide: bool = True,
    ) -> None:
        """`default_role` is the environment's: rules for `default` also apply to it.
        `hide=False` treats hidden-by-default tools as any other (a gateway in front of
        this one hides them)."""
        self._rules: dict[str, dict[str, bool]] = {}
        self.listed: dict[Any, Any] = {}
        """The gateway's cache of tool lists under these rules (`Gateway.tools_for`); emptied
        whenever a rule changes."""
        self._hide = hide
        self._patterns = False  # any `prefix*` rule; lets the common case skip the scan
        self._default_role = default_role
        self._default_chain: tuple[str, ...] = (
            (default_role, DEFAULT_ROLE, WILDCARD)
            if default_role != DEFAULT_ROLE
            else (DEFAULT_ROLE, WILDCARD)
        )
        for rule in rules:
            self.apply(rule.role, rule.action, rule.tools)

    def apply(
        self, role: str, action: Literal["disable", "enable"], tools: list[str] | str
    ) -> None:
        """Disable or enable tools (a list, or `*` for all) for a role (or `*`)."""
        self.listed.clear()
        allowed = action == "enable"
        for name in [WILDCARD] if tools == WILDCARD else tools:
            if name == WILDCARD:
                if role == WILDCARD:
                    self._rules.clear()  # everyone, everything: one rule replaces them all
                self._rules[role] = {WILDCARD: allowed}  # replaces the role's narrower rules
                continue
            if role == WILDCARD:
                # Said of every role: it overrides what each role had about these tools.
                for table in self._rules.values():
                    _set(table, name, allowed)
            if name.endswith(WILDCARD):
                self._patterns = True
            _set(self._rules.setdefault(role, {}), name, allowed)

    def allowed(self, role: str, tool: Tool) -> bool:
        """Whether a caller in `role` may see and call `tool`."""
        if role == SYSTEM.role:
            return True
        if self._rules:  # the common case has none: straight to the tool's own say
            verdict = self._ruled(role, tool)
            if verdict is not None:
                return verdict
        if tool.hidden_by_default and self._hide:
            return False  # no rule named it
        return tool.roles is None or role in tool.roles

    def _ruled(self, role: str, tool: Tool) -> bool | None:
        """The rules' verdict on `tool` for `role`, or None when they leave it open."""
        hidden = tool.hidden_by_default and self._hide
        chain = self._default_chain if role == self._default_role else (role, WILDCARD)
        for who in chain:
            table = self._rules.get(who)
            if not table:
                continue
            verdict = table.get(tool.name)
            if verdict is not None:
                return verdict
            if hidden:
                continue  # only a rule that names a hidden tool applies to it
            if self._patterns:
                verdict = _by_prefix(table, tool.name)
                if verdict is not None:
                    return verdict
            star = table.get(WILDCARD)
            if star is False:
                return False
            if star is True:
                # Enabling `*` lifts disables but grants nothing: a tool declared for other
                # roles stays theirs. Naming the tool is what grants it.
                return None
        return None

    def rules(self) -> dict[str, dict[str, bool]]:
        """The current rules: role -> tool (or `*`, or `prefix*`) -> allowed."""
        return {role: dict(table) for role, table in self._rules.items()}

    def role_rules(self, role: str) -> dict[str, bool]:
        """One role's own rules (a copy; empty if it has none)."""
        return dict(self._rules.get(role, {}))


def _set(table: dict[str, bool], name: str, allowed: bool) -> None:
    if name.endswith(WILDCARD) and len(name) > 1:
        # `email__*`: every tool of a composed child; narrower rules of it give way.
        prefix = name[:-1]
        for other in [n for n in table if n != WILDCARD and n.startswith(prefix)]:
            del table[other]
    table[name] = allowed


def _by_prefix(table: dict[str, bool], name: str) -> bool | None:
    """The verdict of the longest `prefix*` rule that matches `name`, if any."""
    best: tuple[int, bool] | None = None
    for pattern, verdict in table.items():
        matches = len(pattern) > 1 and pattern.endswith(WILDCARD) and name.startswith(pattern[:-1])
        if matches and (best is None or len(pattern) > best[0]):
            best = (len(pattern), verdict)
    return None if best is None else best[1]
