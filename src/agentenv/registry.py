"""The one registry pattern: built-ins by name, plus plugins from entry points and config.

Step types, agents, exporters (and later sandboxes and env backends) are each found by
name in a `Registry`. Plugins come from a Python entry-point group (e.g. `agentenv.steps`)
and from `module:Object` references in a config file (`agentenv.toml`). Built-in names
win over plugins; two plugins claiming one name is an error that names both.
"""

from __future__ import annotations

import importlib
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Generic, TypeVar

T = TypeVar("T")

CONFIG_FILE = "agentenv.toml"


class RegistryError(Exception):
    """A name that cannot be resolved, or a clash between plugins."""


@dataclass
class _Entry(Generic[T]):
    name: str
    loader: Callable[[], T]
    origin: str
    reference: str


@dataclass
class Registry(Generic[T]):
    """Named things of one kind. `kind` reads as a noun in messages ("step type")."""

    kind: str
    group: str
    config_key: str
    name_of: Callable[[T], str]
    _builtins: dict[str, T] = field(default_factory=dict)
    _plugins: dict[str, _Entry[T]] | None = None
    _extra: list[str] = field(default_factory=list)

    def add_builtin(self, item: T, name: str | None = None) -> T:
        """Register a built-in (usable as a class decorator); a second built-in of one
        name is a bug, and an error naming both."""
        key = name or self.name_of(item)
        held = self._builtins.get(key)
        if held is not None and held is not item:
            raise RegistryError(f"two built-in {self.kind}s named {key!r}: {held!r} and {item!r}")
        self._builtins[key] = item
        return item

    def add_references(self, references: Iterable[str]) -> None:
        """Add `module:Object` plugins (what a config file lists); re-scans lazily."""
        self._extra.extend(references)
        self._plugins = None

    def get(self, name: str) -> T:
        """The item called `name`; RegistryError listing what exists if there is none."""
        if name in self._builtins:
            return self._builtins[name]
        plugins = self._scan()
        if name in plugins:
            entry = plugins[name]
            try:
                return entry.loader()
            except Exception as exc:
                raise RegistryError(
                    f"{self.kind} {name!r} from {entry.origin} failed to load: {exc}"
                ) from None
        known = ", ".join(sorted(self.names())) or "none"
        raise RegistryError(f"unknown {self.kind} {name!r} (known: {known})")

    def names(self) -> list[str]:
        """Every name, built-ins first."""
        return list(self._builtins) + [n for n in self._scan() if n not in self._builtins]

    def is_builtin(self, name: str) -> bool:
        """Whether a name is one of ours."""
        return name in self._builtins

    def _scan(self) -> dict[str, _Entry[T]]:
        if self._plugins is not None:
            return self._plugins
        found: dict[str, _Entry[T]] = {}

        def offer(name: str, loader: Callable[[], T], origin: str, reference: str) -> None:
            if name in self._builtins:
                return  # built-in names win
            if name in found and found[name].reference != reference:
                raise RegistryError(
                    f"two plugins claim the {self.kind} {name!r}: {found[name].origin} and {origin}"
                )
            found.setdefault(name, _Entry(name, loader, origin, reference))

        for ep in entry_points(group=self.group):
            offer(ep.name, ep.load, f"entry point {ep.value!r} ({self.group})", ep.value.strip())
        references = list(self._extra) + _config_references(self.config_key)
        for ref in references:
            item = _import_reference(ref, self.kind)
            offer(
                self.name_of(item), lambda item=item: item, f"{ref!r} ({CONFIG_FILE})", ref.strip()
            )
        self._plugins = found
        return found


def _import_reference(ref: str, kind: str) -> object:
    module_name, sep, attr = ref.partition(":")
    if not sep:
        raise RegistryError(f"{kind} plugin {ref!r}: expected 'module:Object'")
    try:
        module = importlib.import_module(module_name)
        return getattr(module, attr)
    except (ImportError, AttributeError) as exc:
        raise RegistryError(f"{kind} plugin {ref!r} cannot be imported: {exc}") from None


def _config_references(key: str, start: Path | None = None) -> list[str]:
    """`key = ["module:Object", ...]` from the nearest agentenv.toml (this folder or up)."""
    folder = (start or Path.cwd()).resolve()
    for candidate in [folder, *folder.parents]:
        path = candidate / CONFIG_FILE
        if path.is_file():
            try:
                data = tomllib.loads(path.read_text(encoding="utf-8"))
            except tomllib.TOMLDecodeError as exc:
                raise RegistryError(f"{path}: {exc}") from None
            value = data.get("plugins", {}).get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise RegistryError(f"{path}: plugins.{key} must be a list of 'module:Object'")
            return value
    return []
