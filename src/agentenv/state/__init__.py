"""State: collections of JSON records with transactions, snapshots, forks, hashes and diffs."""

from agentenv.state._canonical import canonical_json
from agentenv.state.diff import CollectionDiff, RecordChange, StateDiff, diff
from agentenv.state.errors import (
    RecordExists,
    RecordInvalid,
    RecordNotFound,
    StateError,
    UnknownCollection,
)
from agentenv.state.store import CollectionInfo, Record, Snapshot, State
from agentenv.state.view import SEPARATOR, StateView

__all__ = [
    "SEPARATOR",
    "CollectionDiff",
    "CollectionInfo",
    "Record",
    "RecordChange",
    "RecordExists",
    "RecordInvalid",
    "RecordNotFound",
    "Snapshot",
    "State",
    "StateDiff",
    "StateError",
    "StateView",
    "UnknownCollection",
    "canonical_json",
    "diff",
]
