"""Tool access (RBAC): which role may call which tool, changeable at run time.

Rules are looked up for the caller's role, then for the wildcard role `*`; for each, a
rule about the tool is taken before a `prefix*` rule (the longest; `email__*` covers a
composed child's tools), before a rule about `*` (all tools). With no rule (or an
enable of `*`, which lifts disables but grants nothing), a tool is allowed unless it
declares roles and the caller's is not among them; enabling a tool by name grants it. The system principal
passes every rule: trigger actions and control operations are not agents.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from agentenv.env.tool import SYSTEM, Tool
from agentenv.spec.environment import AccessRuleSpec

WILDCARD = "*"


class AccessControl:
    """The tool-access rules of one instance."""

    def __init__(self, rules: Iterable[AccessRuleSpec] = ()) -> None:
        self._rules: dict[str, dict[str, bool]] = {}
        self._patterns = False  # any `prefix*` rule; lets the common case skip the scan
        for rule in rules:
            self.apply(rule.role, rule.action, rule.tools)

    def apply(
        self, role: str, action: Literal["disable", "enable"], tools: list[str] | str
    ) -> None:
        """Disable or enable tools (a list, or `*` for all) for a role (or `*`)."""
        allowed = action == "enable"
        if tools == WILDCARD or tools == [WILDCARD]:
            self._rules[role] = {WILDCARD: allowed}  # replaces the role's narrower rules
            return
        table = self._rules.setdefault(role, {})
        for name in tools:
            if name.endswith(WILDCARD):
                # `email__*`: every tool of a composed child; narrower rules of it give way.
                prefix = name[:-1]
                for other in [n for n in table if n != WILDCARD and n.startswith(prefix)]:
                    del table[other]
                self._patterns = True
            table[name] = allowed

    def allowed(self, role: str, tool: Tool) -> bool:
        """Whether a caller in `role` may see and call `tool`."""
        if role == SYSTEM.role:
            return True
        for who in (role, WILDCARD):
            table = self._rules.get(who)
            if table:
                verdict = table.get(tool.name)
                if verdict is None and self._patterns:
                    verdict = _by_prefix(table, tool.name)
                if verdict is None:
                    # Enabling `*` lifts disables but grants nothing: a tool declared for
                    # other roles stays theirs. Naming the tool is what grants it.
                    if table.get(WILDCARD) is False:
                        return False
                    if table.get(WILDCARD) is True:
                        break
                if verdict is not None:
                    return verdict
        return tool.roles is None or role in tool.roles

    def rules(self) -> dict[str, dict[str, bool]]:
        """The current rules: role -> tool (or `*`) -> allowed."""
        return {role: dict(table) for role, table in self._rules.items()}


def _by_prefix(table: dict[str, bool], name: str) -> bool | None:
    """The verdict of the longest `prefix*` rule that matches `name`, if any."""
    best: tuple[int, bool] | None = None
    for pattern, verdict in table.items():
        matches = len(pattern) > 1 and pattern.endswith(WILDCARD) and name.startswith(pattern[:-1])
        if matches and (best is None or len(pattern) > best[0]):
            best = (len(pattern), verdict)
    return None if best is None else best[1]
