"""The OpenAI-compatible agent: a function-calling loop against any chat-completions endpoint.

`openai:MODEL` talks to OpenAI, vLLM, llama.cpp's server, Ollama, LM Studio, ... through
the official `openai` package (the optional extra `llm`). Each prompt is one loop:

    system prompt + user prompt, the role's tools as function tools
    -> the model answers; each tool call goes through `turn.tools.call` (the Gateway)
    -> the results go back as `tool` messages
    -> until the model answers without tool calls (that text is the response),
       or `max_turns` requests were made (then the last text plus a note).

Tool calls of one answer run one after another, in the order the model gave them, so a
run is reproducible. Arguments that are not a JSON object never reach the gateway: the
model gets a tool message saying so and may try again (counted in `invalid_arguments`).
Token usage is kept per prompt (`agent.turns`) and summed (`agent.usage`).

Transient HTTP errors (429, 5xx, timeouts, dropped connections) are retried by the
`openai` client itself with bounded exponential backoff (`max_retries`); any other API
error, or one that is still failing after the retries, raises AgentError with the
endpoint's message. The agent never makes up a response.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass, field, fields
from types import ModuleType
from typing import Any
from urllib.parse import parse_qsl

from agentenv.agents.base import AgentError, AgentTurn
from agentenv.spec.wire import ToolInfo

log = logging.getLogger(__name__)

EXTRA = "llm"
INSTALL_HINT = f"pip install 'agentenv-kit[{EXTRA}]'"
ENV_PREFIX = "AGENTENV_OPENAI_"
LOCAL_API_KEY = "EMPTY"
"""Sent when a base_url is set but no key is: local servers accept any key."""

NAMED_PARAMS = frozenset(
    {
        "temperature",
        "top_p",
        "seed",
        "max_tokens",
        "parallel_tool_calls",
        "stop",
        "tool_choice",
        "presence_penalty",
        "frequency_penalty",
    }
)
"""model_params passed to `chat.completions.create` by name; any other key goes in
`extra_body` (e.g. vLLM's `top_k`, `repetition_penalty`)."""

RESERVED_PARAMS = frozenset({"model", "messages", "tools", "stream", "functions"})
"""Keys the agent itself controls; model_params may not set them."""


def import_openai() -> ModuleType:
    """The `openai` package, or AgentError saying which extra to install."""
    try:
        import openai
    except ImportError:
        raise AgentError(
            f"the openai agent needs the optional `openai` package: {INSTALL_HINT}"
        ) from None
    return openai


# -- settings ------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpenAISettings:
    """How an OpenAI agent reaches its endpoint and samples. See `make_openai_agent`."""

    model: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    max_turns: int = 20
    temperature: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    parallel_tool_calls: bool | None = None
    timeout: float = 120.0
    max_retries: int = 3

    def sampling(self) -> dict[str, Any]:
        """The request parameters set on the agent (per-prompt model_params override them)."""
        out: dict[str, Any] = {}
        for key in ("temperature", "seed", "max_tokens", "parallel_tool_calls"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


_CONVERTERS: dict[str, type] = {
    "base_url": str,
    "api_key_env": str,
    "max_turns": int,
    "temperature": float,
    "seed": int,
    "max_tokens": int,
    "parallel_tool_calls": bool,
    "timeout": float,
    "max_retries": int,
}
OPTIONS = tuple(_CONVERTERS)
"""Option names of the spec (`openai:MODEL?name=value&...`) and of `make_openai_agent`;
each also reads `AGENTENV_OPENAI_<NAME>` from the environment."""


def _convert(name: str, raw: str, where: str) -> Any:
    kind = _CONVERTERS[name]
    text = raw.strip()
    try:
        if kind is bool:
            lowered = text.lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off"):
                return False
            raise ValueError(text)
        return kind(text)
    except ValueError:
        expected = {bool: "true or false", int: "an integer", float: "a number"}.get(kind, "text")
        raise AgentError(f"{where}: {name} must be {expected}, got {raw!r}") from None


def _from_env(name: str) -> Any:
    variable = ENV_PREFIX + name.upper()
    raw = os.environ.get(variable)
    if raw is None or raw == "":
        return None
    return _convert(name, raw, variable)


def make_openai_agent(
    model: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    api_key_env: str | None = None,
    max_turns: int | None = None,
    temperature: float | None = None,
    seed: int | None = None,
    max_tokens: int | None = None,
    parallel_tool_calls: bool | None = None,
    timeout: float | None = None,
    max_retries: int | None = None,
) -> OpenAIAgent:
    """An OpenAI-compatible agent for `model`.

    Each option left as None comes from `AGENTENV_OPENAI_<OPTION>` if set (the base URL
    then also from `OPENAI_BASE_URL`), else its default: max_turns 20, timeout 120 s,
    max_retries 3, sampling parameters unset (the server's defaults). The API key is
    `api_key`, else the variable named by `api_key_env`, else `OPENAI_API_KEY`; with a
    base_url and no key, the placeholder "EMPTY" is sent (what local servers expect).
    """
    import_openai()
    model = model.strip()
    if not model:
        raise AgentError("the openai agent needs a model: openai:MODEL")

    def pick(name: str, value: Any) -> Any:
        return value if value is not None else _from_env(name)

    base_url = pick("base_url", base_url) or os.environ.get("OPENAI_BASE_URL") or None
    key_variable = pick("api_key_env", api_key_env) or "OPENAI_API_KEY"
    key = api_key or os.environ.get(key_variable) or None
    if key is None:
        if base_url is None:
            raise AgentError(
                f"the openai agent needs an API key: set {key_variable}, or point it at a "
                f"local server with base_url (or {ENV_PREFIX}BASE_URL)"
            )
        key = LOCAL_API_KEY
    values = {
        "max_turns": pick("max_turns", max_turns),
        "temperature": pick("temperature", temperature),
        "seed": pick("seed", seed),
        "max_tokens": pick("max_tokens", max_tokens),
        "parallel_tool_calls": pick("parallel_tool_calls", parallel_tool_calls),
        "timeout": pick("timeout", timeout),
        "max_retries": pick("max_retries", max_retries),
    }
    defaults = {f.name: f.default for f in fields(OpenAISettings)}
    settled = {k: (v if v is not None else defaults[k]) for k, v in values.items()}
    if settled["max_turns"] < 1:
        raise AgentError(f"max_turns must be at least 1, got {settled['max_turns']}")
    if settled["max_retries"] < 0:
        raise AgentError(f"max_retries must be 0 or more, got {settled['max_retries']}")
    if settled["timeout"] <= 0:
        raise AgentError(f"timeout must be positive, got {settled['timeout']}")
    settings = OpenAISettings(model=model, base_url=base_url, api_key=key, **settled)
    return OpenAIAgent(settings)


def openai_agent_from_spec(argument: str) -> OpenAIAgent:
    """The agent of a spec's argument: `MODEL` or `MODEL?option=value&...`.

    The model may contain `:` and `/` (`openai:llama3.1:8b`, `openai:Qwen/Qwen2.5-7B`).
    With no model, `AGENTENV_OPENAI_MODEL` is used.
    """
    model, _, query = argument.partition("?")
    options: dict[str, Any] = {}
    for name, raw in parse_qsl(query, keep_blank_values=True, strict_parsing=False):
        if name not in _CONVERTERS:
            known = ", ".join(OPTIONS)
            raise AgentError(f"unknown openai agent option {name!r} (known: {known})")
        options[name] = _convert(name, raw, f"openai:{argument}")
    model = model or os.environ.get(ENV_PREFIX + "MODEL", "")
    return make_openai_agent(model, **options)


# -- usage ---------------------------------------------------------------------------------


@dataclass
class Usage:
    """Token counts, as the endpoint reported them (0 where it reported none)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def add(self, other: Usage) -> None:
        """Add `other` into this."""
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.total_tokens += other.total_tokens

    @classmethod
    def of(cls, response: Any) -> Usage:
        """The usage of one chat-completions response."""
        usage = getattr(response, "usage", None)
        if usage is None:
            return cls()
        return cls(
            prompt_tokens=getattr(usage, "prompt_tokens", None) or 0,
            completion_tokens=getattr(usage, "completion_tokens", None) or 0,
            total_tokens=getattr(usage, "total_tokens", None) or 0,
        )


@dataclass
class TurnRecord:
    """What one prompt cost and did: per request usage, summed usage, tool calls."""

    prompt_id: str
    model: str
    requests: list[Usage] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    tool_calls: int = 0
    invalid_arguments: int = 0
    finished: bool = False
    """True when the model answered without tool calls; False when max_turns ended it."""

    def to_json(self) -> dict[str, Any]:
        """The record as JSON data (for a task's artifacts or a run folder)."""
        return asdict(self)


# -- the agent -----------------------------------------------------------------------------


def function_tool(info: ToolInfo) -> dict[str, Any]:
    """A gateway tool as an OpenAI function tool."""
    parameters = dict(info.input_schema) if info.input_schema else {}
    parameters.setdefault("type", "object")
    parameters.setdefault("properties", {})
    return {
        "type": "function",
        "function": {"name": info.name, "description": info.description, "parameters": parameters},
    }


def _call_id(call: Any, round_no: int, index: int) -> str:
    """The call's id; servers that send none get a made-up one the reply can refer to."""
    return getattr(call, "id", None) or f"call_{round_no}_{index}"


def _assistant_message(message: Any, round_no: int) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": message.content}
    calls = []
    for index, call in enumerate(message.tool_calls or []):
        function = getattr(call, "function", None)
        calls.append(
            {
                "id": _call_id(call, round_no, index),
                "type": getattr(call, "type", None) or "function",
                "function": {
                    "name": getattr(function, "name", ""),
                    "arguments": getattr(function, "arguments", "") or "",
                },
            }
        )
    if calls:
        out["tool_calls"] = calls
    return out


def _parse_arguments(raw: str | None) -> tuple[dict[str, Any] | None, str | None]:
    """(arguments, None), or (None, why they are not a JSON object)."""
    if raw is None or not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return None, f"the arguments were not valid JSON ({exc.msg} at position {exc.pos})"
    if not isinstance(value, dict):
        return None, f"the arguments must be a JSON object, got {type(value).__name__}"
    return value, None


class OpenAIAgent:
    """A function-calling agent on an OpenAI-compatible chat-completions endpoint.

    Per prompt, `turn.model` overrides the model, `turn.max_turns` the round-trip limit,
    and `turn.model_params` the sampling parameters (temperature, seed, max_tokens,
    parallel_tool_calls, top_p, stop, ...; unknown keys go in `extra_body`).
    """

    name = "openai"

    def __init__(self, settings: OpenAISettings) -> None:
        self.settings = settings
        self.usage = Usage()
        """Token usage summed over every prompt this agent answered."""
        self.turns: list[TurnRecord] = []
        """One record per prompt, in the order they finished."""

    def __repr__(self) -> str:
        return f"OpenAIAgent({self.settings!r})"

    def _request_params(self, turn: AgentTurn) -> tuple[dict[str, Any], dict[str, Any]]:
        params = {**self.settings.sampling(), **turn.model_params}
        reserved = sorted(RESERVED_PARAMS & params.keys())
        if reserved:
            raise AgentError(
                f"model_params may not set {', '.join(reserved)} (the agent sets them)"
            )
        params = {k: v for k, v in params.items() if v is not None}  # None: leave unset
        named = {k: v for k, v in params.items() if k in NAMED_PARAMS}
        extra = {k: v for k, v in params.items() if k not in NAMED_PARAMS}
        return named, extra

    async def run_turn(self, turn: AgentTurn) -> str:
        """Run the tool-calling loop for one prompt and return the model's answer."""
        openai = import_openai()
        settings = self.settings
        model = turn.model or settings.model
        max_turns = turn.max_turns or settings.max_turns
        named, extra = self._request_params(turn)
        tools = [function_tool(info) for info in turn.tools.list_tools()]
        if not tools:
            named.pop("parallel_tool_calls", None)
            named.pop("tool_choice", None)
        messages: list[dict[str, Any]] = []
        if turn.system_prompt:
            messages.append({"role": "system", "content": turn.system_prompt})
        messages.append({"role": "user", "content": turn.prompt})
        record = TurnRecord(prompt_id=turn.prompt_id, model=model)
        where = settings.base_url or "the OpenAI API"
        last_content = ""
        try:
            async with openai.AsyncOpenAI(
                api_key=settings.api_key,
                base_url=settings.base_url,
                timeout=settings.timeout,
                max_retries=settings.max_retries,
            ) as client:
                for round_no in range(max_turns):
                    request: dict[str, Any] = {"model": model, "messages": messages, **named}
                    if tools:
                        request["tools"] = tools
                    if extra:
                        request["extra_body"] = extra
                    log.debug("chat completion %d for %s", len(record.requests) + 1, turn.prompt_id)
                    try:
                        response = await client.chat.completions.create(**request)
                    except openai.APIStatusError as exc:
                        raise AgentError(
                            f"{model} at {where}: HTTP {exc.status_code}: {_api_message(exc)}"
                        ) from None
                    except openai.OpenAIError as exc:
                        raise AgentError(f"{model} at {where}: {exc}") from None
                    usage = Usage.of(response)
                    record.requests.append(usage)
                    record.usage.add(usage)
                    self.usage.add(usage)
                    if not getattr(response, "choices", None):
                        raise AgentError(f"{model} at {where}: the response has no choices")
                    message = response.choices[0].message
                    last_content = message.content or ""
                    if not message.tool_calls:
                        record.finished = True
                        return last_content
                    messages.append(_assistant_message(message, round_no))
                    for index, call in enumerate(message.tool_calls):
                        call_id = _call_id(call, round_no, index)
                        content = await self._run_call(turn, call, record)
                        messages.append(
                            {"role": "tool", "tool_call_id": call_id, "content": content}
                        )
        finally:
            self.turns.append(record)
        note = (
            f"[agentenv: stopped after {max_turns} model turn(s) (max_turns) "
            "without a final answer]"
        )
        return f"{last_content}\n\n{note}" if last_content else note

    async def _run_call(self, turn: AgentTurn, call: Any, record: TurnRecord) -> str:
        """Run one tool call of the model's; the content of its `tool` message."""
        function = getattr(call, "function", None)
        if function is None:
            return "Error: only function tool calls are supported"
        args, problem = _parse_arguments(function.arguments)
        if problem is not None:
            record.invalid_arguments += 1
            return (
                f"Error: {problem}. The tool {function.name!r} was not called; "
                "call it again with the arguments as a JSON object."
            )
        record.tool_calls += 1
        result = await turn.tools.call(function.name, args)
        return result.text


def _api_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str):
            return error
    return getattr(exc, "message", None) or str(exc)
