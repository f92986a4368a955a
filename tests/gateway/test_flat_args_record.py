"""A call record keeps flat arguments (those the fast argument check passed whole) as a
one-level copy instead of their JSON text: what readers get back is the same record,
sanitized the same way, over many inputs; and the row still holds nothing the GC tracks."""

from __future__ import annotations

import gc
import random
from datetime import UTC, datetime
from typing import Any

from agentenv import Principal
from agentenv.gateway.trajectory import Trajectory

_STRINGS = ["", "n7", "héllo", "日本", "\ud800", "a\udfffb", "{[", '"q"', "\x00"]
_FLOATS = [0.0, -0.0, 1.5, 1e308, float("nan"), float("inf"), float("-inf"), 0.1]


def _value(rng: random.Random) -> Any:
    pick = rng.randrange(5)
    if pick == 0:
        return rng.choice(_STRINGS)
    if pick == 1:
        return rng.choice(_FLOATS)
    if pick == 2:
        return rng.choice([0, -1, 2**70, 7])
    if pick == 3:
        return rng.choice([True, False])
    return None


def _add(traj: Trajectory, args: dict[str, Any], flat: bool, tool: str, role: str) -> None:
    traj.add_call(
        "call",
        1_700_000_000_000_000,
        datetime(2026, 3, 2, 9, tzinfo=UTC),
        Principal(role),
        tool,
        args,
        '{"ok": true}',
        None,
        False,
        "0" * 64,
        3,
        2,
        0.5,
        None,
        None,
        flat=flat,
    )


def test_flat_arguments_read_back_as_their_json_would() -> None:
    rng = random.Random(7)
    slow, fast = Trajectory(), Trajectory()
    for _ in range(2000):
        keys = rng.sample(["a", "b", "note_id", "é"], rng.randrange(0, 4))
        args = {key: _value(rng) for key in keys}
        tool = rng.choice(["t", "tool_\ud800", "outil_é"])
        role = rng.choice(["agent", "rôle"])
        _add(slow, args, False, tool, role)
        _add(fast, args, True, tool, role)
        args.clear()  # the caller's dict changes afterwards: history does not
    assert len(slow) == len(fast) == 2000
    for a, b in zip(slow.records(), fast.records(), strict=True):
        assert a.to_json() == b.to_json()
        assert a.sanitized == b.sanitized
    assert any(r.sanitized for r in fast.records())  # the inputs did need cleaning
    assert any(r.args for r in fast.records() if not r.sanitized)


def test_flat_argument_rows_are_not_tracked_and_readers_get_copies() -> None:
    traj = Trajectory()
    for i in range(50):
        _add(traj, {"i": i, "s": "x"}, True, "t", "agent")
    gc.collect()
    rows = traj._hot
    assert not any(gc.is_tracked(v) for r in rows for v in r)
    first = traj[0].args
    assert first == {"i": 0, "s": "x"}
    first["i"] = 99
    assert traj[0].args == {"i": 0, "s": "x"}


def test_a_spill_moves_the_fewest_oldest_records_that_leave_half_of_each_bound(
    monkeypatch: Any,
) -> None:
    import json

    import agentenv.gateway.trajectory as module

    monkeypatch.setattr(module, "HOT_RECORDS", 16)
    monkeypatch.setattr(module, "HOT_BYTES", 6000)
    rng = random.Random(3)
    traj = Trajectory()
    moves = 0
    for i in range(400):
        args = {"s": "x" * rng.choice([0, 10, 300, 1500])}
        sizes = [*traj._hot_sizes, len(json.dumps(args, separators=(",", ":"))) + 400 + 12]
        spilled_before = traj.spilled
        _add(traj, args, False, "t", "agent")
        moved = traj.spilled - spilled_before
        if moved:
            moves += 1
            # The reference: the loop this replaced, one record at a time.
            held, count = sum(sizes), 0
            while count < len(sizes) and (
                count == 0 or len(sizes) - count > 16 // 2 or held > 6000 // 2
            ):
                held -= sizes[count]
                count += 1
            assert moved == count, i
        assert traj._hot_bytes == sum(traj._hot_sizes)
    assert moves > 20
    assert [r.args for r in traj.records()][-1] == args
