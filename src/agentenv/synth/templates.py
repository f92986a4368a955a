"""Task text from templates: one numbered step per call of the walk, worded from the
tool's description, with the values the agent is given (quoted exactly), the records it
must find (named by an attribute when obfuscated), and the values it must carry over
from earlier steps (never stated: the agent reads them from the results). No LLM; an
LLM may later paraphrase this text, the verifiers do not depend on its wording.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agentenv.synth.binding import Bound
from agentenv.synth.schema import singular
from agentenv.synth.verify import Fact
from agentenv.synth.walks import Walk

MAX_SUMMARY = 140
_EXAMPLE = re.compile(r",?\s*\(?\b(?:e\.g\.|i\.e\.|for example)[^.;:)]*\)?", re.IGNORECASE)


def summary(description: str, tool: str) -> str:
    """The first clause of a tool's description, without examples: "Read one ticket in
    full: its thread..." -> "Read one ticket in full"."""
    text = _EXAMPLE.sub("", description.strip())
    text = re.split(r"(?<=[.!?])\s|\n", text, maxsplit=1)[0].strip()
    text = text.split(": ", 1)[0].rstrip(" .")
    if not text:
        text = f"Call {tool}"
    if len(text) > MAX_SUMMARY:
        text = text[: MAX_SUMMARY - 3].rstrip() + "..."
    return text[0].upper() + text[1:]


def quote(value: Any) -> str:
    """A value as the prompt states it: text in double quotes, other values as JSON."""
    return json.dumps(value, ensure_ascii=False)


def phrase(
    b: Bound,
    step: int,
    obfuscated: dict[tuple[int, str], tuple[str, str, str]],
    hidden_ids: dict[str, tuple[str, str]] | None = None,
) -> str:
    """How the prompt tells the agent one argument. `hidden_ids`: record ids the prompt
    names by an attribute instead, id -> (field, value)."""
    hidden_ids = hidden_ids or {}
    hidden = obfuscated.get((step, b.param))
    if hidden is not None:
        coll, attr, value = hidden
        return f"{b.param}: the {singular(coll)} whose {attr} is {quote(value)}"
    if b.source == "upstream" and b.step is not None:
        hint = b.hint
        if hint is not None and str(hint[1]) in hidden_ids:  # never show an id the prompt hides
            hint = hidden_ids[str(hint[1])]
        return f"{b.param}: {source_phrase(b.path or b.param, b.step, hint, b.position)}"
    return f"{b.param} {quote(b.value)}"


def source_phrase(
    path: str, step: int, hint: tuple[str, Any] | None = None, position: int | None = None
) -> str:
    """Where a value is found in an earlier step's result: "the `id` of the ticket
    listed in step 1 whose `subject` is "Lamp arrived broken"", "the `customer.email`
    in step 2's result"."""
    if "[]" not in path:
        return f"the `{path}` in step {step + 1}'s result"
    head, _, rest = path.rpartition("[]")
    container = head.rsplit(".", 1)[-1] or "result"
    name = rest.lstrip(".") or "value"
    text = f"the `{name}` of the {singular(container)} listed in step {step + 1}"
    if hint is not None:
        return f"{text} whose `{hint[0]}` is {quote(hint[1])}"
    if position is not None:
        return f"the `{name}` of item {position} listed in step {step + 1}"
    return text


def steps_text(
    walk: Walk,
    descriptions: dict[str, str],
    obfuscated: dict[tuple[int, str], tuple[str, str, str]],
) -> str:
    """The numbered steps."""
    hidden_ids = {
        str(walk.calls[i].args[param]): (f, v)
        for (i, param), (_, f, v) in sorted(obfuscated.items())
    }
    lines = []
    for i, call in enumerate(walk.calls):
        head = summary(descriptions.get(call.tool, ""), call.tool)
        phrases = [phrase(b, i, obfuscated, hidden_ids) for b in call.bounds]
        lines.append(f"{i + 1}. {head}" + (f" ({'; '.join(phrases)})." if phrases else "."))
    return "\n".join(lines)


def prompt(env_name: str, steps: str, facts: list[Fact]) -> str:
    """The whole prompt: the steps, then what the final answer must say."""
    intro = f"You are working in the {env_name} environment. Do the following, in order:"
    if facts:
        wanted = [source_phrase(f.path, f.step) for f in facts]
        listed = ", ".join(wanted[:-1]) + (" and " if len(wanted) > 1 else "") + wanted[-1]
        outro = f"When you are done, answer with {listed}."
    else:
        outro = "When you are done, answer with a short summary of what you did."
    return f"{intro}\n{steps}\n{outro}"


def given_values(walk: Walk, obfuscated: dict[tuple[int, str], tuple[str, str, str]]) -> set[str]:
    """The values the prompt states outright (as text)."""
    out = set()
    for i, call in enumerate(walk.calls):
        for b in call.bounds:
            if b.source != "upstream" and (i, b.param) not in obfuscated:
                out.add(str(b.value))
    return out


def description(walk: Walk, difficulty: dict[str, Any]) -> str:
    """A one-line description of a synthesized task."""
    tools = " -> ".join(c.tool for c in walk.calls)
    return (
        f"Synthesized {difficulty['topology']} task of depth {difficulty['depth']}: {tools} "
        f"(obfuscated {difficulty['obfuscated']}, distractors {difficulty['distractors']})."
    )
