"""StateView: one composed child's part of a State, under the child's own names.

A composed environment keeps every child's collections in one State, prefixed
(`email__messages`); the child's tools keep calling `ctx.state.get("messages", ...)`
through a view that adds the prefix. Writes go to the shared State, inside the same
transaction, so a call stays all-or-nothing across children.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

from agentenv.state.store import CollectionInfo, Record, State

SEPARATOR = "__"


class StateView:
    """The collections of `state` whose names start with `prefix + "__"`, unprefixed."""

    __slots__ = ("_base", "_prefix")

    def __init__(self, base: State | StateView, prefix: str) -> None:
        self._base = base
        self._prefix = prefix + SEPARATOR

    def _n(self, collection: str) -> str:
        return self._prefix + collection

    @property
    def collections(self) -> list[str]:
        """The view's collection names, without the prefix."""
        n = len(self._prefix)
        return [c[n:] for c in self._base.collections if c.startswith(self._prefix)]

    def info(self, collection: str) -> CollectionInfo:
        """Key field and schema of a collection."""
        return self._base.info(self._n(collection))

    def get(self, collection: str, key: Any) -> Record | None:
        """A copy of the record, or None."""
        return self._base.get(self._n(collection), key)

    def require(self, collection: str, key: Any) -> Record:
        """A copy of the record; RecordNotFound if there is none."""
        return self._base.require(self._n(collection), key)

    def has(self, collection: str, key: Any) -> bool:
        """Whether the record exists."""
        return self._base.has(self._n(collection), key)

    def list(self, collection: str) -> list[Record]:
        """Copies of every record of a collection."""
        return self._base.list(self._n(collection))

    def find(
        self, collection: str, where: Callable[[Record], bool] | None = None, **equals: Any
    ) -> list[Record]:
        """Copies of the matching records."""
        return self._base.find(self._n(collection), where, **equals)

    def keys(self, collection: str) -> list[str]:
        """The keys of a collection."""
        return self._base.keys(self._n(collection))

    def count(self, collection: str) -> int:
        """How many records a collection holds."""
        return self._base.count(self._n(collection))

    def put(self, collection: str, record: Mapping[str, Any]) -> Record:
        """Insert or replace a record."""
        return self._base.put(self._n(collection), record)

    def insert(self, collection: str, record: Mapping[str, Any]) -> Record:
        """Add a new record."""
        return self._base.insert(self._n(collection), record)

    def update(self, collection: str, key: Any, changes: Mapping[str, Any]) -> Record:
        """Merge changes into a record."""
        return self._base.update(self._n(collection), key, changes)

    def delete(self, collection: str, key: Any) -> Record:
        """Remove a record."""
        return self._base.delete(self._n(collection), key)

    @property
    def changes(self) -> int:
        """The whole state's change counter."""
        return self._base.changes

    def hash(self) -> str:
        """The whole state's hash (a view has no hash of its own)."""
        return self._base.hash()

    def collection_hash(self, collection: str) -> str:
        """The hash of one of the view's collections (under its full name)."""
        return self._base.collection_hash(self._n(collection))

    def transaction(self) -> _ViewTransaction:
        """A transaction on the whole state (`as` gives this view)."""
        return _ViewTransaction(self)


class _ViewTransaction:
    """A transaction of the base state that hands out the view (class-based: cheap)."""

    __slots__ = ("_inner", "_view")

    def __init__(self, view: StateView) -> None:
        self._view = view
        self._inner = view._base.transaction()

    def __enter__(self) -> StateView:
        self._inner.__enter__()
        return self._view

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._inner.__exit__(kind, exc, tb)
