"""The data plane forwarded to a server's own: an upstream-style environment folder (written
with upstream's protocol SDK, run with .venv-upstream's python) whose notes live only in
its process. data/add, data/reset and data/get through our gateway reach it, and its data
is mirrored into our state; a composed parent routes each child's data to its own plane.
Real server processes; the wire test goes through a real uvicorn server."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.serve.conftest import running_server

from agentenv import Environment, Gateway, Principal
from agentenv.env.servers import loop
from agentenv.gateway.errors import DataError
from agentenv.spec.wire import DataPart

FIXTURE = Path(__file__).parents[1] / "env" / "servers" / "upstream_folder"
UPSTREAM_PYTHON = Path(__file__).resolve().parents[2] / ".venv-upstream" / "bin" / "python"
ADMIN = Principal("admin", admin=True)
AGENT = Principal("agent")


def _load(tmp_path: Path, body: str) -> Environment:
    if not UPSTREAM_PYTHON.is_file():
        pytest.skip(f"no upstream protocol SDK virtualenv at {UPSTREAM_PYTHON}")
    shutil.copytree(FIXTURE, tmp_path / "notes-folder")
    doc = tmp_path / "env.yaml"
    doc.write_text("apiVersion: agentenv/v1\nkind: Environment\n" + body)
    return Environment.load(doc)


@pytest.fixture
def notes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Environment]:
    monkeypatch.setenv("AGENTENV_LOG_DIR", str(tmp_path / "logs"))
    env = _load(
        tmp_path,
        f"name: notes\nserver: {{folder: notes-folder, python: {UPSTREAM_PYTHON}, pool: 1}}\n",
    )
    yield env
    env.close()


def _listed(gateway: Gateway, instance: str = "default") -> list[dict]:
    result = loop.run(gateway.call(AGENT, "list_notes", {}, instance=instance))
    assert result.ok, result.error
    value = result.value
    return (json.loads(value) if isinstance(value, str) else value)["notes"]


def test_data_add_and_reset_reach_the_server_and_come_back_as_state(notes: Environment) -> None:
    gateway = Gateway(notes)
    part = DataPart(kind="data", data={"notes": [{"id": "s1", "text": "seeded"}]})
    assert loop.run(gateway.data_add(ADMIN, [part])) == 1
    assert _listed(gateway) == [{"id": "s1", "text": "seeded"}]  # the server holds it
    state = gateway.instance().state
    assert state.get("notes", "s1") == {"id": "s1", "text": "seeded"}  # and our state shows it

    loop.run(gateway.call(AGENT, "add_note", {"text": "by the agent"}))
    fetched = loop.run(gateway.data_fetch())
    assert [p.model_dump() for p in fetched] == [
        {
            "kind": "data",
            "data": {
                "notes": [{"id": "s1", "text": "seeded"}, {"id": "n2", "text": "by the agent"}]
            },
            "metadata": None,
        }
    ]

    loop.run(gateway.data_reset(ADMIN))
    assert _listed(gateway) == []
    assert list(gateway.instance().state.keys("notes")) == []


def test_each_instance_reaches_its_own_servers_data(notes: Environment) -> None:
    gateway = Gateway(notes)
    gateway.create_instance("b")
    part = DataPart(kind="data", data={"notes": [{"id": "x", "text": "only in b"}]})
    loop.run(gateway.data_add(ADMIN, [part], instance="b"))
    assert _listed(gateway, "b") == [{"id": "x", "text": "only in b"}]
    assert _listed(gateway) == []


def test_a_server_refusing_data_add_is_a_data_error_naming_it(notes: Environment) -> None:
    gateway = Gateway(notes)
    bad = DataPart(kind="data", data={"notes": "not a list"})
    with pytest.raises(DataError, match="data/add failed"):
        loop.run(gateway.data_add(ADMIN, [bad]))
    assert _listed(gateway) == []  # still serving, nothing added


def test_data_get_on_the_wire_is_the_servers_own(notes: Environment) -> None:
    gateway = Gateway(notes)
    loop.run(gateway.call(AGENT, "add_note", {"text": "over the wire"}))
    with running_server(gateway) as url:
        body = {"jsonrpc": "2.0", "id": 1, "method": "data/get", "params": {}}
        answer = httpx.post(url + "/agentenv", json=body, timeout=30).json()
    assert answer["result"]["parts"] == [
        {"kind": "data", "data": {"notes": [{"id": "n1", "text": "over the wire"}]}}
    ]


def test_a_composed_parent_routes_each_childs_data_to_its_own_plane(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTENV_LOG_DIR", str(tmp_path / "logs"))
    env = _load(
        tmp_path,
        "name: desk\n"
        "state: {todo: {key: id}}\n"
        "compose:\n"
        f"  - {{as: memo, server: {{folder: notes-folder, python: {UPSTREAM_PYTHON}, pool: 1}}}}\n",
    )
    try:
        gateway = Gateway(env)
        mixed = DataPart(kind="data", data={"todo": [{"id": "t1"}], "memo__notes": [{"id": "m"}]})
        with pytest.raises(
            DataError, match=r"add it through its own data plane \(/svc/memo/agentenv\)"
        ):
            loop.run(gateway.data_add(ADMIN, [mixed]))
        assert list(gateway.instance().state.keys("todo")) == []  # all or nothing

        memo = DataPart(kind="data", data={"notes": [{"id": "m", "text": "memo"}]})
        loop.run(gateway.data_add(ADMIN, [memo], namespace="memo__"))
        own = DataPart(kind="data", data={"todo": [{"id": "t1"}]})
        loop.run(gateway.data_add(ADMIN, [own]))
        assert gateway.instance().state.get("memo__notes", "m") == {"id": "m", "text": "memo"}
        result = loop.run(gateway.call(AGENT, "memo__list_notes", {}))
        assert "memo" in result.text
        with running_server(gateway) as url:
            body = {"jsonrpc": "2.0", "id": 1, "method": "data/get", "params": {}}
            answer = httpx.post(url + "/svc/memo/agentenv", json=body, timeout=30).json()
        assert answer["result"]["parts"] == [
            {"kind": "data", "data": {"notes": [{"id": "m", "text": "memo"}]}}
        ]

        loop.run(gateway.data_reset(ADMIN))  # the whole env: the server child too
        assert "memo" not in loop.run(gateway.call(AGENT, "memo__list_notes", {})).text
        assert list(gateway.instance().state.keys("todo")) == []
    finally:
        env.close()
