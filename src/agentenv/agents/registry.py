"""Finding agents by name: built-ins, plus plugins (`agentenv.agents` entry points)."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import parse_qsl, urlencode

from agentenv.agents.base import Agent, AgentError
from agentenv.agents.human import HumanAgent
from agentenv.agents.openai_agent import openai_agent_from_spec
from agentenv.agents.oracle import NoopAgent, OracleAgent, PartialOracleAgent
from agentenv.agents.replay import ReplayAgent
from agentenv.agents.scripted import ScriptedAgent
from agentenv.agents.simulated_user import SimulatedUser
from agentenv.registry import Registry, RegistryError

AgentFactory = Callable[[str], Agent]
"""Builds an agent from the part of its spec after `name:` ('' if none)."""


def _named(factory: AgentFactory) -> str:
    return getattr(factory, "agent_name", getattr(factory, "__name__", "?"))


AGENTS: Registry[AgentFactory] = Registry(
    kind="agent", group="agentenv.agents", config_key="agents", name_of=_named
)


def _oracle(argument: str) -> Agent:
    if argument:
        raise RegistryError("the oracle agent takes no argument")
    return OracleAgent()


AGENTS.add_builtin(_oracle, "oracle")


def _configuration_errors(name: str, build: Callable[[str], Agent]) -> AgentFactory:
    """A factory whose AgentErrors (a bad spec, a missing package) are RegistryErrors."""

    def factory(argument: str) -> Agent:
        try:
            return build(argument)
        except AgentError as exc:
            raise RegistryError(f"agent {name!r}: {exc}") from None

    factory.agent_name = name  # type: ignore[attr-defined]
    return factory


def _human(argument: str) -> Agent:
    if argument:
        raise AgentError("the human agent takes no argument")
    return HumanAgent()


_openai = _configuration_errors("openai", openai_agent_from_spec)
_openai.base_url_option = "base_url"  # type: ignore[attr-defined]
AGENTS.add_builtin(_openai, "openai")
AGENTS.add_builtin(_configuration_errors("replay", ReplayAgent.from_spec), "replay")
AGENTS.add_builtin(_configuration_errors("scripted", ScriptedAgent.from_spec), "scripted")
AGENTS.add_builtin(_configuration_errors("human", _human), "human")


def _simulated_user(argument: str) -> Agent:
    if argument:
        raise AgentError("the simulated user takes no argument (configure it in agent_config)")
    return SimulatedUser()


AGENTS.add_builtin(_configuration_errors("simulated-user", _simulated_user), "simulated-user")


def make_agent(spec: str) -> Agent:
    """An agent from a spec such as `oracle` or `name:argument`.

    Built-ins: `oracle`, `openai:MODEL[?option=value&...]`, `replay:FILE[?option=...]`,
    `scripted:module:function`, `human`, `simulated-user`. A bad argument is a
    RegistryError.
    """
    name, _, argument = spec.partition(":")
    return AGENTS.get(name)(argument)


def with_base_url(spec: str, url: str) -> str:
    """The spec of the same agent talking to the endpoint `url` (what `--base-url` gives
    on `run`, `rollout` and `agent serve`): for `openai:MODEL[?...]` its `base_url`
    option, set or replaced. A plugin agent takes one when its factory has a
    `base_url_option` attribute (the query option to set). RegistryError for an agent that
    takes none. Show the original spec as the agent's name: the endpoint is where it runs,
    not what it is."""
    name, _, argument = spec.partition(":")
    option = getattr(AGENTS.get(name), "base_url_option", None)
    if not isinstance(option, str) or not option:
        raise RegistryError(f"agent {name!r} takes no --base-url")
    if not url.strip():
        raise RegistryError("--base-url is empty")
    head, _, query = argument.partition("?")
    kept = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k != option]
    return f"{name}:{head}?{urlencode([*kept, (option, url)], safe=':/')}"


def _a2a(argument: str) -> Agent:
    """`a2a:URL[?timeout=S&solution=auto|always|never]`: a remote agent over A2A."""
    from agentenv.agents.a2a import require_sdk

    require_sdk()
    from agentenv.agents.a2a.client import RemoteA2AAgent  # a2a-sdk loads only when used

    return RemoteA2AAgent.from_spec(argument)


AGENTS.add_builtin(_configuration_errors("a2a", _a2a), "a2a")


def _no_argument(cls: Callable[[], Agent], name: str) -> AgentFactory:
    def factory(argument: str) -> Agent:
        if argument:
            raise RegistryError(f"the {name} agent takes no argument")
        return cls()

    return factory


AGENTS.add_builtin(_no_argument(NoopAgent, "noop"), "noop")
AGENTS.add_builtin(_no_argument(PartialOracleAgent, "partial"), "partial")
