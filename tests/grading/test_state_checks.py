"""State checklists: declarative field and count checks, Python checks, partial credit."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from agentenv import Environment, Gateway, Principal
from agentenv.grading import CountCheck, FieldCheck, Score, VerifierError, check_state
from agentenv.grading.state_checks import STATE_CHECKS
from agentenv.state import State

ENV = """
apiVersion: agentenv/v1
kind: Environment
name: shop
state:
  orders:
    schema:
      type: object
      properties: {id: {type: string}, status: {type: string}}
  customers: {key: email}
seed:
  customers:
    - {email: ada@example.com, name: Ada, tier: gold, tags: [vip, early]}
  orders:
    - id: o1
      customer: ada@example.com
      total: 40.5
      status: open
      lines: [{sku: k1, qty: 2}]
    - {id: o2, customer: ada@example.com, total: 10, status: shipped, lines: []}
tools:
  - name: create_order
    crud: {collection: orders, op: create}
  - name: update_order
    crud: {collection: orders, op: update}
"""


@pytest.fixture
def gateway(tmp_path: Path) -> Gateway:
    (tmp_path / "env.yaml").write_text(textwrap.dedent(ENV))
    return Gateway(Environment.load(tmp_path))


@pytest.fixture
def state(gateway: Gateway) -> State:
    return gateway.instance().state


def _names(score: Score) -> dict[str, bool]:
    return {c["name"]: c["passed"] for c in score.details["checks"]}


def test_field_operators(state: State) -> None:
    checks = [
        {"collection": "orders", "key": "o1", "field": "total", "equals": 40.5},
        {"collection": "orders", "key": "o1", "field": "status", "in": ["open", "pending"]},
        {"collection": "orders", "key": "o1", "field": "total", "gte": 40, "lte": 41},
        {"collection": "orders", "key": "o1", "field": "total", "gt": 40, "lt": 40.6},
        {"collection": "orders", "key": "o2", "field": "status", "not_equals": "open"},
        {"collection": "orders", "key": "o1", "field": "lines.0.sku", "equals": "k1"},
        {"collection": "orders", "key": "o1", "field": "lines", "contains": {"sku": "k1"}},
        {"collection": "customers", "key": "ada@example.com", "field": "tags", "contains": "vip"},
        {"collection": "customers", "key": "ada@example.com", "field": "name", "contains": "Ad"},
        {"collection": "orders", "key": "o1"},
        {"collection": "orders", "key": "o9", "exists": False},
        {"collection": "orders", "key": "o1", "field": "refund", "exists": False},
    ]
    score = check_state(state, checks)
    assert score.score == 1.0 and score.passed, score.details
    assert score.details["total_checks"] == len(checks)


def test_a_failing_check_says_what_it_found(state: State) -> None:
    score = check_state(
        state,
        [
            {"collection": "orders", "key": "o1", "field": "status", "equals": "closed"},
            {"collection": "orders", "key": "o9", "field": "status", "equals": "open"},
            {"collection": "orders", "key": "o1", "field": "total", "gte": "a"},
        ],
    )
    assert score.score == 0.0 and not score.passed
    details = [c["detail"] for c in score.details["checks"]]
    assert details[0] == "orders[o1].status is 'open', expected == 'closed'"
    assert details[1] == "orders[o9].status is absent"
    assert "not comparable" in details[2]
    assert score.details["failed"] == [
        "orders[o1].status == 'closed'",
        "orders[o9].status == 'open'",
        "orders[o1].total >= 'a'",
    ]


def test_equals_null_and_json_equality(state: State) -> None:
    state.put("orders", {"id": "o3", "customer": None, "total": 1, "paid": True})
    score = check_state(
        state,
        [
            {"collection": "orders", "key": "o3", "field": "customer", "equals": None},
            {"collection": "orders", "key": "o3", "field": "total", "equals": 1.0},
            {"collection": "orders", "key": "o3", "field": "paid", "equals": 1},
            {"collection": "orders", "key": "o3", "field": "total", "equals": True},
        ],
    )
    assert _names(score) == {
        "orders[o3].customer == None": True,
        "orders[o3].total == 1.0": True,
        "orders[o3].paid == 1": False,
        "orders[o3].total == True": False,
    }


def test_count_checks(state: State) -> None:
    checks = [
        {"collection": "orders", "count": 2},
        {"collection": "orders", "where": {"status": "open"}, "count": 1},
        {"collection": "orders", "where": {"customer": "ada@example.com"}, "min_count": 2},
        {"collection": "orders", "where": {"status": "gone"}, "max_count": 0},
        {"name": "big open orders", "collection": "orders", "where": {"total": 10}, "count": 3},
    ]
    score = check_state(state, checks)
    assert score.score == pytest.approx(4 / 5)
    assert not score.passed
    assert score.details["checks"][-1] == {
        "name": "big open orders",
        "passed": False,
        "detail": "found 1",
    }
    assert score.details["checks"][1]["name"] == "count(orders where status='open') == 1"


def test_python_checks_in_every_form(state: State) -> None:
    def every_order_has_a_customer(s: State) -> bool:
        return all(o.get("customer") for o in s.list("orders"))

    score = check_state(
        state,
        [
            every_order_has_a_customer,
            ("two orders", lambda s: s.count("orders") == 2),
            ("raises", lambda s: s.require("orders", "nope")),
        ],
    )
    assert _names(score) == {
        "every_order_has_a_customer": True,
        "two orders": True,
        "raises": False,
    }
    assert "RecordNotFound" in score.details["checks"][2]["detail"]
    by_mapping = check_state(state, {"no refunds": lambda s: s.count("orders") < 5})
    assert by_mapping.passed


def test_python_checks_cannot_change_the_state(state: State) -> None:
    before = state.hash()

    def vandal(s: State) -> bool:
        s.delete("orders", "o1")
        return True

    assert check_state(state, [vandal]).passed
    assert state.hash() == before and state.has("orders", "o1")


def test_partial_credit_and_threshold(state: State) -> None:
    checks = [
        {"collection": "orders", "key": "o1", "field": "status", "equals": "open"},
        {"collection": "orders", "key": "o2", "field": "status", "equals": "open"},
    ]
    half = check_state(state, checks)
    assert (half.score, half.passed) == (0.5, False)
    assert check_state(state, checks, threshold=0.5).passed


async def test_snapshots_and_states_after_gateway_calls(gateway: Gateway) -> None:
    before = gateway.instance().state.snapshot()
    result = await gateway.call(
        Principal("agent"), "update_order", {"id": "o1", "status": "closed"}
    )
    assert result.ok, result.text
    check = [{"collection": "orders", "key": "o1", "field": "status", "equals": "closed"}]
    assert check_state(gateway.instance().state, check).passed
    assert not check_state(before, check).passed


def test_an_unknown_collection_is_an_error_not_a_failure(state: State) -> None:
    with pytest.raises(VerifierError, match=r"unknown collection 'oders' \(collections: "):
        check_state(state, [{"collection": "oders", "key": "o1"}])
    with pytest.raises(VerifierError, match="unknown collection"):
        check_state(state, [{"collection": "oders", "count": 1}])


def test_bad_declarations_name_the_check(state: State) -> None:
    with pytest.raises(VerifierError, match=r"state check 1 \(equal\): .*Extra inputs"):
        check_state(
            state,
            [
                {"collection": "orders", "count": 2},
                {"collection": "orders", "key": "o1", "equal": 3},
            ],
        )
    with pytest.raises(VerifierError, match="needs 'count', 'min_count' or 'max_count'"):
        check_state(state, [{"collection": "orders", "where": {"status": "open"}}])
    with pytest.raises(VerifierError, match="expected a dict, a callable"):
        check_state(state, [42])
    with pytest.raises(VerifierError, match="no checks"):
        check_state(state, [])


def test_models_round_trip_with_the_in_alias() -> None:
    parsed = STATE_CHECKS.validate_python(
        [{"collection": "a", "key": 1, "in": [1, 2]}, {"collection": "a", "min_count": 1}]
    )
    assert isinstance(parsed[0], FieldCheck) and parsed[0].in_ == [1, 2]
    assert isinstance(parsed[1], CountCheck)
    dumped = parsed[0].model_dump(by_alias=True, exclude_unset=True)
    assert dumped == {"collection": "a", "key": 1, "in": [1, 2]}


def test_names_are_made_unique(state: State) -> None:
    check = {"name": "same", "collection": "orders", "count": 2}
    score = check_state(state, [check, check])
    assert [c["name"] for c in score.details["checks"]] == ["same", "same#2"]
