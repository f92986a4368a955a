"""Progress reporting for rollouts: the Progress protocol and its rich bar."""

from __future__ import annotations

import time
from typing import Any, Protocol

# -- progress -----------------------------------------------------------------------------


class Progress(Protocol):
    """What a runner reports to while it runs."""

    def start(self, total: int, done: int) -> None:
        """`total` episodes in the plan, `done` already in the store."""

    def advance(self, status: str) -> None:
        """One more episode finished with this status."""

    def stop(self) -> None:
        """The run is over (finished or interrupted)."""


class RichProgress:
    """A rich progress bar: done/total, passed, failed, errors, episodes/s, ETA."""

    def __init__(self, console: Any = None, description: str = "rollout") -> None:
        from rich.console import Console

        self.console = console or Console(stderr=True)
        self.description = description
        self._bar: Any = None
        self._task: Any = None
        self._counts = {"passed": 0, "failed": 0, "errors": 0}
        self._ran = 0
        self._t0 = 0.0

    def start(self, total: int, done: int) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.progress import Progress as Bar

        self._bar = Bar(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(
                "[green]{task.fields[passed]} passed[/] [red]{task.fields[failed]} failed[/] "
                "[yellow]{task.fields[errors]} errors[/]"
            ),
            TextColumn("{task.fields[rate]} ep/s"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=self.console,
            refresh_per_second=4,
        )
        self._task = self._bar.add_task(
            self.description, total=total, completed=done, rate="-", **self._counts
        )
        self._t0 = time.perf_counter()
        self._bar.start()

    def advance(self, status: str) -> None:
        key = "passed" if status == "passed" else "failed" if status == "failed" else "errors"
        self._counts[key] += 1
        self._ran += 1
        elapsed = max(time.perf_counter() - self._t0, 1e-9)
        if self._bar is not None:
            self._bar.update(
                self._task, advance=1, rate=f"{self._ran / elapsed:.1f}", **self._counts
            )

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


class _NoProgress:
    def start(self, total: int, done: int) -> None:
        pass

    def advance(self, status: str) -> None:
        pass

    def stop(self) -> None:
        pass


def make_progress(progress: Progress | bool | None) -> Progress:
    """A Progress from a runner's `progress` argument (True: a rich bar on stderr)."""
    if progress is True:
        return RichProgress()
    if progress is None or progress is False:
        return _NoProgress()
    return progress
