"""The tool dependency graph: nodes, strong and weak edges, JSON and DOT, the CLI."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from agentenv import Environment
from agentenv.synth.graph import ToolGraph, build_graph, callable_tools
from agentenv.synth.schema import informative, key_norm, leaves, singular, tool_params

ROOT = Path(__file__).resolve().parents[2]
DESK = ROOT / "examples" / "envs" / "support-desk"
runner = CliRunner()

BROKEN_ENV = """\
apiVersion: agentenv/v1
kind: Environment
name: broken
state:
  items: {key: id}
seed:
  items: [{id: I-1, name: first}, {id: I-2, name: second}]
tools:
  - module: tools.py
"""

BROKEN_TOOLS = '''
from agentenv import ToolContext, ToolError, tool


@tool(kind="read")
def get_item(ctx: ToolContext, item_id: str) -> dict:
    """Get an item by id."""
    raise ToolError("the item service is down")


@tool
def rename_item(ctx: ToolContext, item_id: str, name: str) -> dict:
    """Rename an item."""
    raise ToolError("the item service is down")
'''


def cli_app() -> typer.Typer:
    """The commands as the main app wires them."""
    from agentenv.cli.synth_command import graph as graph_command
    from agentenv.cli.synth_command import synth_app

    app = typer.Typer()
    app.command()(graph_command)
    app.add_typer(synth_app, name="synth")
    return app


def broken_env(folder: Path) -> Path:
    """An environment whose every tool fails."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "env.yaml").write_text(BROKEN_ENV)
    (folder / "tools.py").write_text(textwrap.dedent(BROKEN_TOOLS))
    return folder


@pytest.fixture(scope="module")
def desk() -> Environment:
    return Environment.load(DESK)


@pytest.fixture(scope="module")
def desk_graph(desk: Environment) -> ToolGraph:
    import asyncio

    return asyncio.run(build_graph(desk))


def edge(g: ToolGraph, source: str, target: str, field: str, param: str):
    found = [
        e
        for e in g.edges
        if (e.source, e.target, e.field, e.param) == (source, target, field, param)
    ]
    return found[0] if found else None


def test_names_are_normalised() -> None:
    assert singular("tickets") == "ticket"
    assert singular("categories") == "category"
    assert singular("inbox") == "inbox"
    assert singular("addresses") == "address"
    assert singular("email__messages") == "message"
    assert key_norm("customers", "id") == "customer_id"


def test_a_crud_key_parameter_is_the_collections_id(desk: Environment) -> None:
    keys = {c: desk.seed.infos()[c].key for c in desk.seed.infos()}
    params = {p.name: p for p in tool_params(desk.tools["get_customer"], keys)}
    assert params["id"].norm == "customer_id" and params["id"].required
    params = {p.name: p for p in tool_params(desk.tools["list_tickets"], keys)}
    assert params["status"].enum == ["open", "pending", "closed"]
    assert not params["status"].accepts("archived") and params["status"].accepts("open")


def test_result_fields_know_the_record_they_belong_to(desk: Environment) -> None:
    state = desk.seed.fork()
    summary = {"id": "T-1042", "customer_id": "C-003", "subject": "Double charge on order O-5531"}
    found = {leaf.path: leaf for leaf in leaves({"tickets": [summary], "total": 1}, state)}
    assert found["tickets[].id"].norm == "ticket_id"
    assert found["tickets[].id"].entity == "tickets"
    assert found["tickets[].customer_id"].norm == "customer_id"
    assert found["total"].entity is None
    assert not informative({"tickets": [], "total": 0}) and not informative(None)
    assert informative({"tickets": [summary], "total": 1})


def test_nodes_are_the_tools_the_role_may_call(desk: Environment, desk_graph: ToolGraph) -> None:
    assert sorted(desk_graph.nodes) == callable_tools(desk, "agent")
    assert "deliver_email" not in desk_graph.nodes  # hidden from every role
    assert "open_ticket" not in desk_graph.nodes  # a customer tool
    assert desk_graph.nodes["issue_refund"].kind == "write"
    assert desk_graph.nodes["read_ticket"].kind == "read"


def test_edges_join_identifiers_strongly(desk_graph: ToolGraph) -> None:
    listed = edge(desk_graph, "list_tickets", "read_ticket", "tickets[].id", "ticket_id")
    assert listed is not None and listed.strength == "strong" and "name" in listed.reasons
    # `customer_id` of a ticket feeds the `id` of a CRUD get on customers
    owner = edge(desk_graph, "read_ticket", "get_customer", "customer_id", "id")
    assert owner is not None and owner.strength == "strong"
    assert edge(desk_graph, "read_ticket", "get_order", "order_id", "id") is not None
    # never a customer id into an order id
    assert edge(desk_graph, "read_ticket", "get_order", "customer_id", "id") is None


def test_weak_edges_by_description_and_observation(desk_graph: ToolGraph) -> None:
    # send_email's `to` is "The recipient's email address": a customer's email feeds it
    email = edge(desk_graph, "read_ticket", "send_email", "customer.email", "to")
    assert email is not None and email.strength == "weak"
    assert "description" in email.reasons and "observed" in email.reasons
    status = edge(desk_graph, "read_ticket", "list_tickets", "status", "status")
    assert status is not None and status.strength == "weak"  # a name, not an identifier
    assert any(e.reasons == ("observed",) for e in desk_graph.edges)


def test_probes_find_the_outputs_of_python_tools(desk: Environment) -> None:
    import asyncio

    bare = asyncio.run(build_graph(desk, probes=0))
    assert bare.nodes["read_ticket"].outputs == {}  # a Python tool declares no outputs
    assert "email" in bare.nodes["get_customer"].outputs  # a CRUD tool does
    assert not bare.out_edges("read_ticket")
    probed = asyncio.run(build_graph(desk, probes=2))
    assert "customer.email" in probed.nodes["read_ticket"].outputs
    assert probed.nodes["read_ticket"].outputs["customer.email"].observed


def test_the_graph_of_another_role(desk: Environment) -> None:
    import asyncio

    customer = asyncio.run(build_graph(desk, role="customer"))
    assert sorted(customer.nodes) == ["check_ticket_status", "open_ticket"]
    with pytest.raises(ValueError, match="unknown role"):
        asyncio.run(build_graph(desk, role="nobody"))


def test_json_is_sorted_and_stable(desk: Environment, desk_graph: ToolGraph) -> None:
    import asyncio

    data = desk_graph.to_json()
    again = asyncio.run(build_graph(desk)).to_json()
    assert json.dumps(data) == json.dumps(again)
    assert [n["name"] for n in data["nodes"]] == sorted(desk_graph.nodes)
    stats = data["stats"]
    assert stats["edges"] == len(data["edges"]) == stats["strong"] + stats["weak"]
    assert all(e["strength"] in ("strong", "weak") and e["reasons"] for e in data["edges"])
    json.loads(json.dumps(data))  # plain JSON data


def test_dot_draws_writes_as_boxes_and_weak_edges_dashed(desk_graph: ToolGraph) -> None:
    dot = desk_graph.to_dot()
    assert dot.startswith('digraph "support-desk" {') and dot.rstrip().endswith("}")
    assert '"issue_refund" [shape=box];' in dot
    assert '"read_ticket" [shape=ellipse];' in dot
    line = next(
        ln for ln in dot.splitlines() if ln.strip().startswith('"list_tickets" -> "read_ticket"')
    )
    assert "style=solid" in line and "tickets[].id→ticket_id" in line
    dashed = next(ln for ln in dot.splitlines() if '-> "search_customers"' in ln)
    assert "style=dashed" in dashed


def test_an_env_whose_tools_all_fail_has_no_edges(tmp_path: Path) -> None:
    import asyncio

    env = Environment.load(broken_env(tmp_path / "broken"))
    g = asyncio.run(build_graph(env))
    assert sorted(g.nodes) == ["get_item", "rename_item"]
    assert g.edges == [] and all(n.probes_ok == 0 for n in g.nodes.values())


def test_cli_prints_json_and_dot(tmp_path: Path) -> None:
    app = cli_app()
    result = runner.invoke(app, ["graph", str(DESK), "--format", "dot"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith('digraph "support-desk"')
    result = runner.invoke(app, ["graph", str(DESK)])
    assert result.exit_code == 0 and json.loads(result.output)["env"] == "support-desk"
    out = tmp_path / "g.json"
    result = runner.invoke(app, ["graph", str(DESK), "--out", str(out), "--probes", "1"])
    assert result.exit_code == 0 and json.loads(out.read_text())["stats"]["nodes"] == 12


def test_cli_bad_input_gives_one_clear_line(tmp_path: Path) -> None:
    app = cli_app()
    result = runner.invoke(app, ["graph", str(DESK), "--format", "xml"])
    assert result.exit_code == 2 and "--format must be one of json, dot," in result.output
    result = runner.invoke(app, ["graph", str(tmp_path / "nowhere")])
    assert result.exit_code == 1 and "no such file or folder" in result.output
    result = runner.invoke(app, ["graph", str(DESK), "--role", "nobody"])
    assert result.exit_code == 2 and "unknown role 'nobody'" in result.output
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit)
