"""The scripted agent: a Python function plays the agent.

`scripted:module:function` imports `function` from `module` (a dotted module name on the
import path, or a path to a `.py` file: `scripted:agents/mine.py:solve`) and calls it with
each turn: `fn(turn: AgentTurn) -> str`. An `async def` function is awaited, which is what
a function that calls tools needs (`await turn.tools.call(...)`); a plain function runs on
the event loop, so keep it quick (no tool calls, no blocking I/O).

Problems importing the function are AgentErrors that say what is missing; errors raised by
the function itself propagate unchanged (an AgentError fails the prompt with its message,
anything else is a bug whose traceback you want).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from agentenv.agents.base import AgentError, AgentTurn

ScriptFunction = Callable[[AgentTurn], Any]


def _load_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise AgentError(f"scripted agent: no such file {str(path)!r}")
    resolved = path.resolve()
    digest = hashlib.sha1(str(resolved).encode()).hexdigest()[:12]
    name = f"agentenv_scripted_{resolved.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise AgentError(f"scripted agent: cannot load {str(path)!r} as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise AgentError(
            f"scripted agent: importing {str(path)!r} failed: {type(exc).__name__}: {exc}"
        ) from None
    return module


def load_function(reference: str) -> ScriptFunction:
    """The callable named by `module:function` (or `path/to/file.py:function`)."""
    module_name, sep, attr = reference.rpartition(":")
    if not sep or not module_name or not attr:
        raise AgentError(
            f"scripted agent: expected 'module:function' (or 'file.py:function'), got {reference!r}"
        )
    if module_name.endswith(".py") or "/" in module_name or "\\" in module_name:
        module = _load_file(Path(module_name))
    else:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            missing = exc.name or ""
            if module_name == missing or module_name.startswith(missing + "."):
                raise AgentError(
                    f"scripted agent: no module named {module_name!r} "
                    "(is it installed, or on PYTHONPATH?)"
                ) from None
            raise AgentError(f"scripted agent: importing {module_name!r} failed: {exc}") from None
        except Exception as exc:
            raise AgentError(
                f"scripted agent: importing {module_name!r} failed: {type(exc).__name__}: {exc}"
            ) from None
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise AgentError(f"scripted agent: {module_name!r} has no attribute {attr!r}") from None
    if not callable(obj):
        raise AgentError(f"scripted agent: {reference!r} is a {type(obj).__name__}, not a function")
    return obj


class ScriptedAgent:
    """Calls `fn(turn)` for each turn (awaiting it if it is async) and answers its text."""

    name = "scripted"

    def __init__(self, fn: ScriptFunction, *, reference: str | None = None) -> None:
        if not callable(fn):
            raise AgentError(f"scripted agent: {fn!r} is not callable")
        self.fn = fn
        self.reference = reference or getattr(fn, "__qualname__", repr(fn))

    @classmethod
    def from_spec(cls, argument: str) -> ScriptedAgent:
        """The agent of a spec's argument, `module:function`."""
        if not argument:
            raise AgentError("the scripted agent needs a function: scripted:module:function")
        return cls(load_function(argument), reference=argument)

    async def run_turn(self, turn: AgentTurn) -> str:
        """The function's answer for this turn."""
        answer = self.fn(turn)
        if inspect.isawaitable(answer):
            answer = await answer
        if not isinstance(answer, str):
            raise AgentError(
                f"scripted agent {self.reference}: returned {type(answer).__name__}, "
                "expected the response text (str)"
            )
        return answer
