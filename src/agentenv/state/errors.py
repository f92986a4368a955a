"""Errors raised by State. Each names the collection and key it is about."""

from __future__ import annotations


class StateError(Exception):
    """Base class of every error State raises."""


class UnknownCollection(StateError, KeyError):
    """A collection name that the state does not have."""

    def __init__(self, collection: str, known: list[str]) -> None:
        self.collection = collection
        listing = ", ".join(known) or "none"
        super().__init__(f"unknown collection {collection!r} (collections: {listing})")

    def __str__(self) -> str:
        return str(self.args[0])


class RecordNotFound(StateError, KeyError):
    """A key that is not in its collection."""

    def __init__(self, collection: str, key: str) -> None:
        self.collection = collection
        self.key = key
        super().__init__(f"no record {key!r} in {collection!r}")

    def __str__(self) -> str:
        return str(self.args[0])


class RecordExists(StateError):
    """An insert whose key is already taken."""

    def __init__(self, collection: str, key: str) -> None:
        self.collection = collection
        self.key = key
        super().__init__(f"record {key!r} already exists in {collection!r}")


class RecordInvalid(StateError):
    """A record that is not JSON, lacks its key field, or breaks its collection's schema."""

    def __init__(self, collection: str, key: str | None, problem: str) -> None:
        self.collection = collection
        self.key = key
        self.problem = problem
        where = f"{collection}[{key!r}]" if key is not None else collection
        super().__init__(f"invalid record {where}: {problem}")
