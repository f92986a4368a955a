"""DocumentError: one message naming the file, the place inside it and the problem."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentenv.spec import DocumentError, EnvironmentSpec
from agentenv.spec.errors import format_location


@pytest.mark.parametrize(
    ("loc", "text"),
    [
        ((), "<document>"),
        (("name",), "name"),
        (("tools", 3, "params", "amount"), "tools[3].params.amount"),
        (("tools", 0, "params", "amount", "type"), "tools[0].params.amount.type"),
        # Discriminator tags that pydantic adds are not what the user wrote.
        (("triggers", 0, "when", "action", "tool"), "triggers[0].when.tool"),
        (("triggers", 0, "when", "time"), "triggers[0].when"),
        (("triggers", 0, "actions", 1, "tool", "args"), "triggers[0].actions[1].args"),
        (("triggers", 0, "actions", 0, "permission", "role"), "triggers[0].actions[0].role"),
        # ... but a field that happens to be called like a tag stays.
        (("tools", 0, "crud", "collection"), "tools[0].crud.collection"),
        (("x", "tool"), "x.tool"),
        # Keys that are not identifiers are quoted.
        (("seed", "my tickets", 0), "seed['my tickets'][0]"),
        (("state", "a.b"), "state['a.b']"),
        ((0, "x"), "[0].x"),
    ],
)
def test_format_location(loc: tuple, text: str) -> None:
    assert format_location(loc) == text


def test_message_names_file_path_and_problem() -> None:
    err = DocumentError("envs/bank/env.yaml", "tools[1].name", "bad name")
    assert str(err) == "envs/bank/env.yaml: tools[1].name: bad name"
    assert (err.file, err.path, err.problem, err.more) == (
        "envs/bank/env.yaml",
        "tools[1].name",
        "bad name",
        0,
    )
    assert isinstance(err, ValueError)


def test_message_without_a_file() -> None:
    assert str(DocumentError(None, "name", "missing")) == "name: missing"


def test_message_counts_further_problems() -> None:
    assert str(DocumentError("f.yaml", "a", "x", more=1)) == "f.yaml: a: x (and 1 more problem)"
    assert str(DocumentError("f.yaml", "a", "x", more=4)) == "f.yaml: a: x (and 4 more problems)"


def _validation_error(data: dict) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        EnvironmentSpec.model_validate(data)
    return info.value


BASE = {"apiVersion": "agentenv/v1", "kind": "Environment", "name": "shop"}


def test_from_validation_reports_the_first_problem_and_counts_the_rest() -> None:
    exc = _validation_error({"kind": "Environment", "name": 5, "bogus": 1})
    err = DocumentError.from_validation(exc, "env.yaml")
    assert err.path == "apiVersion"
    assert err.problem == "Field required"  # a missing field has no "got"
    assert err.more == 2
    assert str(err) == "env.yaml: apiVersion: Field required (and 2 more problems)"


def test_from_validation_says_unknown_field_for_extras() -> None:
    err = DocumentError.from_validation(_validation_error({**BASE, "colour": "red"}), "env.yaml")
    assert (err.path, err.problem) == ("colour", "unknown field")


def test_from_validation_shows_the_bad_value_shortened() -> None:
    err = DocumentError.from_validation(
        _validation_error({**BASE, "description": ["y" * 200]}), "env.yaml"
    )
    assert err.problem.startswith("Input should be a valid string (got ['yyy")
    assert err.problem.endswith("...)")
    assert len(err.problem) < 120
    short = DocumentError.from_validation(_validation_error({**BASE, "version": 3}), None)
    assert short.problem == "Input should be a valid string (got 3)"


def test_from_validation_strips_the_value_error_prefix() -> None:
    exc = _validation_error({**BASE, "tools": [{"name": "x"}]})
    err = DocumentError.from_validation(exc, None)
    assert err.path == "tools[0]"
    assert err.problem.startswith("a tool needs exactly one of 'function'")
    assert "Value error" not in str(err)


def test_from_validation_prefix_places_the_document_inside_another() -> None:
    exc = _validation_error({**BASE, "tools": [{"name": "x", "crud": {"collection": "c"}}]})
    err = DocumentError.from_validation(exc, "bundle.yaml", prefix="envs[2]")
    assert err.path == "envs[2].tools[0].crud.op"
    whole = DocumentError.from_validation(
        _validation_error({"apiVersion": "agentenv/v1", "name": "x"}), None, prefix="envs[0]"
    )
    assert whole.path == "envs[0].kind"
