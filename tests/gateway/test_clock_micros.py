"""The clock's own microseconds (what a call record keeps) always agree with the time it
gives: through set, advance by any duration, saturation, clear, and wall mode."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone

from agentenv.gateway.clock import VirtualClock
from agentenv.gateway.rows import micros


def test_micros_of_now_equals_the_rows_conversion() -> None:
    rng = random.Random(5)
    real = [100.0]
    clock = VirtualClock(real_time=lambda: real[0])
    assert clock.micros_of(clock.now()) is None
    clock.set(datetime(2026, 3, 2, 9, 0, 0, 123, tzinfo=timezone(timedelta(hours=2))))
    for _ in range(3000):
        pick = rng.random()
        if pick < 0.6:
            clock.advance(timedelta(microseconds=rng.choice([0, 1, 999, 10**6, 86400 * 10**6])))
        elif pick < 0.65:
            clock.advance(timedelta(days=10**6))  # saturates at the largest instant
        elif pick < 0.7:
            clock.set(datetime(rng.randrange(1, 9000), 1, 1, tzinfo=UTC), mode="stepped")
        elif pick < 0.75:
            clock.set(datetime(2026, 1, 1, tzinfo=UTC), rate=rng.choice([0, 1, 60]), mode="wall")
        elif pick < 0.8:
            real[0] += rng.random()
        elif pick < 0.82:
            clock.clear()
            assert clock.micros_of(clock.now()) is None
            clock.set(datetime(2026, 1, 1, tzinfo=UTC), mode="stepped")
        now = clock.now()
        assert clock.micros_of(now) == micros(now)
    other = datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=-5)))
    assert clock.micros_of(other) is other  # a time in another zone is kept as given
