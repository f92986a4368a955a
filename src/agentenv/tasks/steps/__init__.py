"""Built-in step types, one module per family. Importing this registers them."""

from agentenv.tasks.steps import (
    collection,
    control,
    deploy,
    judging,
    prompting,
    sandbox,
    sandbox_verifiers,
    setup,
    validators,
    verification,
)

__all__ = [
    "collection",
    "control",
    "deploy",
    "judging",
    "prompting",
    "sandbox",
    "sandbox_verifiers",
    "setup",
    "validators",
    "verification",
]
