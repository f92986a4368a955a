"""The random-seed option of the commands that generate (`synth ...`, `check`):
`--random-seed N`. `--seed` means task seed values (`KEY=VALUE`) on run, rollout and
trials, so here it is refused with a message that points to `--random-seed`."""

from __future__ import annotations

from typing import Annotated

import typer

from agentenv.cli._common import fail

USAGE_EXIT = 2

RandomSeed = Annotated[
    int,
    typer.Option("--random-seed", help="Seed of every random choice: same seed, same output."),
]
"""`--random-seed N` (default 0)."""

OldSeed = Annotated[
    str | None,
    typer.Option("--seed", hidden=True, help="Refused: the random seed is --random-seed N."),
]
"""A hidden `--seed` that exists only to be refused by `refuse_old_seed`."""


def refuse_old_seed(value: str | None, command: str) -> None:
    """Exit 2 with a message pointing to `--random-seed` when `--seed` was given."""
    if value is None:
        return
    fail(
        f"`agent-env {command}` has no --seed: its random seed is --random-seed N "
        f"(e.g. --random-seed {value}); --seed KEY=VALUE sets task seed values on run, "
        "rollout and trials",
        USAGE_EXIT,
    )
