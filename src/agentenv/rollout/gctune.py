"""The cyclic garbage collector while a rollout runs: long-lived data frozen, rarer passes.

A rollout allocates fast (every call makes records, results, snapshots) while it holds a
large, long-lived heap (the loaded environments and their seeded snapshots, the plan, the
modules) and, at high concurrency, every in-flight episode's objects. CPython's default
thresholds (700, 10, 10) run a young collection every 700 net allocations and a full one
every 100 young ones, and each full pass walks the whole heap: at concurrency 1,024 that
was 57% of a rollout's time when trajectories were held as objects (issue 12). Since
trajectory rows are untracked tuples the GC is 6-13% with or without this module, and
the measured effect of the tuning is neutral (docs/rollouts.md); it stays as the guard
for heaps this machine did not measure (big seeds, tools that keep objects). So while a
runner runs:

- `gc.freeze()` after the environments and seeds are loaded moves everything alive then
  (environments, seeds, plan, modules) to the permanent generation, which no collection
  walks;
- the thresholds are raised (`THRESHOLD`): young collections every 50,000 net
  allocations, full ones rarer still. Cycles are still collected (an episode's garbage is
  mostly acyclic and freed by reference counting anyway), only less often.

Both are undone when the last runner in the process finishes: the thresholds come back
and what the runner froze is unfrozen. Where something else had already frozen objects
(a server that froze its own heap, `serve.make_server`), the runner freezes nothing:
`gc.unfreeze()` can only unfreeze everything, so freezing there would keep whatever the
runner froze out of every collection for the rest of the process.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

THRESHOLD = (50_000, 50, 100)
"""`gc.set_threshold` while a runner runs (bench_rollout.py measures it against CPython's
defaults: neutral on the support-desk rollout, docs/rollouts.md)."""

_lock = threading.Lock()
_depth = 0
_saved: tuple[tuple[int, ...], bool] | None = None


@contextlib.contextmanager
def tuned_gc(enabled: bool = True, threshold: tuple[int, int, int] = THRESHOLD) -> Iterator[None]:
    """Freeze what is alive now and raise the GC thresholds until the block ends (nested
    and concurrent uses share one setting: the outermost restores it). A no-op when not
    `enabled`."""
    global _depth, _saved
    if not enabled:
        yield
        return
    with _lock:
        if _depth == 0:
            ours = gc.get_freeze_count() == 0  # else: someone else's freeze (see above)
            _saved = (gc.get_threshold(), ours)
            if ours:
                # No gc.collect() first: on a big heap it costs more than a short run saves
                # (measured); garbage frozen now is unfrozen, and collectable, after the run.
                gc.freeze()
            gc.set_threshold(*threshold)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _saved is not None:
                old, unfreeze = _saved
                gc.set_threshold(*old)
                if unfreeze:
                    gc.unfreeze()
                _saved = None


def freeze_loaded() -> None:
    """Freeze what is alive now (a worker process, after loading its plan's environments,
    for the rest of its life)."""
    gc.collect()
    gc.freeze()
