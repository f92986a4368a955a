"""File checks: a state check on one file of a workspace's tree (`{file: ...}`).

```yaml
checks:
  - {file: invoice/totals.py, contains: "ROUND_HALF_UP"}
  - {file: README.md, matches: "(?m)^## Usage"}
  - {file: config.json, json: server.port, equals: 8080}
  - {file: scratch.txt, exists: false}
```

The tree is the collection `files` (a workspace's default; `collection` names another).
Given together, the conditions must all hold; with none, the file must exist.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentenv.grading.checklist import (
    MISSING,
    CheckResult,
    VerifierError,
    json_equal,
    lookup,
    short,
)
from agentenv.state import UnknownCollection
from agentenv.workspace import text_of


class FileCheck(BaseModel):
    """One file of a tree: exists (or not), contains a string, matches a regex, or holds
    JSON whose dotted `json` path equals a value."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    file: str = Field(description="The file's path in the tree.")
    collection: str = "files"
    exists: bool | None = None
    contains: str | None = None
    matches: str | None = Field(default=None, description="A regular expression, searched.")
    json_path: str | None = Field(
        default=None, alias="json", description="A dotted path into the file's JSON."
    )
    equals: Any = None

    def label(self) -> str:
        """The check's name, or a description of it."""
        if self.name:
            return self.name
        given = self.model_fields_set - {"name", "file", "collection"}
        if not given or given == {"exists"}:
            return f"{self.file} {'is absent' if self.exists is False else 'exists'}"
        parts = []
        if self.contains is not None:
            parts.append(f"contains {short(self.contains, 40)}")
        if self.matches is not None:
            parts.append(f"matches /{short(self.matches, 40)}/")
        if self.json_path is not None:
            parts.append(f"{self.json_path} == {short(self.equals, 40)}")
        return f"{self.file} {' and '.join(parts)}"

    def evaluate(self, state: Any) -> CheckResult:
        """Run the check on a state (or snapshot, or view) holding the tree."""
        try:
            record = state.get(self.collection, self.file)
        except UnknownCollection as exc:
            raise VerifierError(f"file check: {exc} (is this a workspace environment?)") from None
        if self.exists is False:
            ok = record is None
            return CheckResult(self.label(), ok, "" if ok else f"{self.file} exists")
        if record is None:
            return CheckResult(self.label(), False, f"no file {self.file}")
        text = text_of(record)
        problems = []
        if (
            self.contains is not None or self.matches is not None or self.json_path
        ) and text is None:
            return CheckResult(self.label(), False, f"{self.file} is binary")
        if self.contains is not None and self.contains not in (text or ""):
            problems.append(f"does not contain {short(self.contains, 60)}")
        if self.matches is not None:
            try:
                if re.search(self.matches, text or "") is None:
                    problems.append(f"does not match /{short(self.matches, 60)}/")
            except re.error as exc:
                problems.append(f"matches is not a regular expression: {exc}")
        if self.json_path is not None:
            try:
                data = json.loads(text or "")
            except ValueError as exc:
                problems.append(f"is not JSON: {exc}")
            else:
                found = lookup(data, self.json_path)
                if found is MISSING:
                    problems.append(f"has no {self.json_path}")
                elif not json_equal(found, self.equals):
                    problems.append(
                        f"{self.json_path} is {short(found)}, expected {short(self.equals)}"
                    )
        return CheckResult(
            self.label(), not problems, "; ".join(f"{self.file} {p}" for p in problems)
        )
