"""Loading environment documents: files, folders, seed files and located errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from agentenv.spec import (
    DocumentError,
    EnvironmentSpec,
    find_environment_file,
    load_environment_spec,
    parse_environment_spec,
    read_document,
)

TICKETS = {
    "schema": {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "status": {"type": "string", "enum": ["open", "closed"]},
            "priority": {"type": "integer", "minimum": 1},
        },
        "required": ["id", "status"],
    }
}

GOOD = {
    "apiVersion": "agentenv/v1",
    "kind": "Environment",
    "name": "helpdesk",
    "roles": [{"name": "agent"}, {"name": "supervisor"}],
    "state": {"tickets": TICKETS, "notes": {"key": "note_id"}},
    "seed": {
        "tickets": [{"id": "T-1", "status": "open"}, {"id": "T-2", "status": "closed"}],
    },
    "tools": [
        {"name": "get_ticket", "crud": {"collection": "tickets", "op": "get"}},
        {
            "name": "create_ticket",
            "crud": {"collection": "tickets", "op": "create"},
            "roles": ["agent"],
        },
    ],
    "access": [{"role": "supervisor", "tools": ["create_ticket"]}],
}


def write(path: Path, data, fmt: str = "yaml") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(data, sort_keys=False) if fmt == "yaml" else json.dumps(data, indent=2)
    path.write_text(text)
    return path


# -- good documents --------------------------------------------------------------------------


def test_a_good_document_loads_from_its_folder(tmp_path: Path) -> None:
    file = write(tmp_path / "helpdesk" / "env.yaml", GOOD)
    spec, found = load_environment_spec(tmp_path / "helpdesk")
    assert found == file
    assert isinstance(spec, EnvironmentSpec)
    assert spec.name == "helpdesk"
    assert spec.role_names == ["agent", "supervisor"]
    assert spec.seed["tickets"] == GOOD["seed"]["tickets"]
    assert [t.name for t in spec.tools] == ["get_ticket", "create_ticket"]


def test_a_good_document_loads_from_json_and_from_the_file_itself(tmp_path: Path) -> None:
    file = write(tmp_path / "environment.json", GOOD, fmt="json")
    spec, found = load_environment_spec(file)
    assert found == file
    assert spec == load_environment_spec(tmp_path)[0]
    yaml_spec, _ = load_environment_spec(write(tmp_path / "other" / "env.yaml", GOOD))
    assert yaml_spec == spec


@pytest.mark.parametrize(
    "name", ["env.yaml", "env.yml", "env.json", "environment.yaml", "environment.json"]
)
def test_every_document_file_name_is_found_in_a_folder(tmp_path: Path, name: str) -> None:
    file = write(tmp_path / name, GOOD, fmt="json" if name.endswith(".json") else "yaml")
    assert find_environment_file(tmp_path) == file


def test_env_yaml_wins_over_the_other_names(tmp_path: Path) -> None:
    write(tmp_path / "environment.json", GOOD, fmt="json")
    preferred = write(tmp_path / "env.yaml", GOOD)
    assert find_environment_file(tmp_path) == preferred


def test_a_folder_without_a_document(tmp_path: Path) -> None:
    with pytest.raises(DocumentError) as info:
        find_environment_file(tmp_path)
    assert info.value.file == str(tmp_path)
    assert "no env.yaml / env.yml / env.json" in str(info.value)


def test_a_path_that_does_not_exist(tmp_path: Path) -> None:
    with pytest.raises(DocumentError, match="no such file or folder") as info:
        load_environment_spec(tmp_path / "nope")
    assert str(info.value).startswith(str(tmp_path / "nope"))


# -- syntax errors ---------------------------------------------------------------------------


def test_a_yaml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    file = tmp_path / "env.yaml"
    file.write_text("apiVersion: agentenv/v1\nkind: Environment\n\tname: x\n")
    with pytest.raises(DocumentError) as info:
        load_environment_spec(tmp_path)
    err = info.value
    assert err.file == str(file)
    assert err.path == "line 3"
    assert err.problem.startswith("invalid YAML: ")
    assert str(err).startswith(f"{file}: line 3: invalid YAML: ")


def test_an_unclosed_yaml_list(tmp_path: Path) -> None:
    file = tmp_path / "env.yml"
    file.write_text("name: [unclosed\n")
    with pytest.raises(DocumentError, match=r"invalid YAML: expected ',' or '\]'"):
        read_document(file)


def test_a_json_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    file = tmp_path / "env.json"
    file.write_text('{\n  "name": "x",\n  oops\n}\n')
    with pytest.raises(DocumentError) as info:
        load_environment_spec(file)
    assert info.value.path == "line 3"
    assert str(info.value) == (
        f"{file}: line 3: invalid JSON: Expecting property name enclosed in double quotes"
    )


def test_an_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(DocumentError, match="cannot read"):
        read_document(tmp_path)


def test_read_document_by_extension(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"id": 1}\n\n{"id": 2}\n')
    (tmp_path / "b.json").write_text("[1, 2]")
    (tmp_path / "c.txt").write_text("- 1\n- 2\n")  # anything else is read as YAML
    assert read_document(tmp_path / "a.jsonl") == [{"id": 1}, {"id": 2}]
    assert read_document(tmp_path / "b.json") == [1, 2]
    assert read_document(tmp_path / "c.txt") == [1, 2]


def test_a_jsonl_line_may_hold_unicode_line_separators(tmp_path: Path) -> None:
    # JSON keeps U+2028 and U+2029 raw in strings; only "\n" ends a JSONL line.
    (tmp_path / "a.jsonl").write_text('{"id": "a\u2028b"}\n{"id": "c\u2029d"}\n')
    assert read_document(tmp_path / "a.jsonl") == [{"id": "a\u2028b"}, {"id": "c\u2029d"}]


@pytest.mark.parametrize(
    ("text", "kind"), [("- a\n- b\n", "list"), ("", "NoneType"), ("hi", "str")]
)
def test_a_document_that_is_not_a_mapping(tmp_path: Path, text: str, kind: str) -> None:
    (tmp_path / "env.yaml").write_text(text)
    with pytest.raises(DocumentError) as info:
        load_environment_spec(tmp_path)
    assert str(info.value) == f"{tmp_path / 'env.yaml'}: <document>: expected a mapping, got {kind}"


# -- bad documents: each names the file, the path and what was expected ----------------------


def _with(**changes) -> dict:
    doc = json.loads(json.dumps(GOOD))
    for dotted, value in changes.items():
        node = doc
        *parents, last = dotted.split("__")
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[int(last) if last.isdigit() else last] = value
    return doc


BAD_DOCUMENTS = [
    (
        _with(
            tools=[
                GOOD["tools"][0],
                {
                    "name": "refund",
                    "crud": {"collection": "tickets", "op": "list"},
                    "params": {"amount": {"type": "money"}},
                },
            ]
        ),
        "tools[1].params.amount.type",
        "Input should be 'string', 'integer', 'number', 'boolean', 'array' or 'object' (got 'money')",
    ),
    (
        _with(seed={"tickets": [{"id": "T-1", "status": "pending"}]}),
        "seed.tickets[0].status",
        "'pending' is not one of ['open', 'closed']",
    ),
    (
        _with(
            seed={
                "tickets": [
                    {"id": "T-1", "status": "open"},
                    {"id": "T-2", "status": "open", "priority": 0},
                ]
            }
        ),
        "seed.tickets[1].priority",
        "0 is less than the minimum of 1",
    ),
    (
        _with(tools__0__crud__collection="orders"),
        "tools[0].crud.collection",
        "unknown collection 'orders' (collections: tickets, notes)",
    ),
    (
        _with(access=[{"role": "ghost", "tools": "*"}], strict_roles=True),
        "access[0].role",
        "unknown role 'ghost' (roles: agent, supervisor)",
    ),
    (
        _with(tools__1__roles=["agent", "boss"]),
        "tools[1].roles[1]",
        "unknown role 'boss' (roles: agent, supervisor)",
    ),
    (_with(default_role="boss"), "default_role", "unknown role 'boss'"),
    (
        _with(seed={"orders": []}),
        "seed.orders",
        "no collection 'orders' is declared in 'state'",
    ),
    (_with(tools__0__crud__op="upsert"), "tools[0].crud.op", "Input should be 'get', 'list'"),
    (_with(tools__0__timeout=-1), "tools[0].timeout", "Input should be greater than 0 (got -1)"),
    (_with(name="help desk"), "name", "String should match pattern"),
    (_with(kind="Task"), "kind", "Input should be 'Environment' (got 'Task')"),
    (_with(apiVersion="agentenv/v2"), "apiVersion", "Input should be 'agentenv/v1'"),
    (_with(colour="red"), "colour", "unknown field"),
    (_with(tools__0__colour="red"), "tools[0].colour", "unknown field"),
    (_with(state__notes__schema={"type": 5}), "state.notes.schema", "not a valid JSON schema"),
    (_with(clock={"start": "2026-03-02T09:00:00"}), "clock.start", "start needs a timezone"),
    (_with(clock={"rate": 100000}), "clock.rate", "Input should be less than or equal to 86400"),
    (_with(tools__0={"name": "x"}), "tools[0]", "a tool needs exactly one of 'function'"),
    (_with(seed={"tickets": [{"status": "open"}]}), "seed.tickets[0]", "missing key field 'id'"),
    (
        _with(
            seed={"tickets": [{"id": "T-1", "status": "open"}, {"id": "T-1", "status": "closed"}]}
        ),
        "seed.tickets[1].id",
        "duplicate key 'T-1'",
    ),
    (
        _with(seed={"notes": [{"note_id": 1}, {"note_id": "1"}]}),
        "seed.notes[1].note_id",
        "duplicate key '1'",
    ),
    # Lax numbers and durations (issue 11, defect 11): each was accepted before.
    (_with(clock={"rate": False}), "clock.rate", "Input should be a valid number (got False)"),
    (_with(clock={"default_duration": "-PT1S"}), "clock.default_duration", "must not be neg"),
    (_with(clock={"default_duration": True}), "clock.default_duration", "expected a duration"),
    (_with(tools__0__timeout=True), "tools[0].timeout", "Input should be a valid number"),
    (_with(tools__0__timeout=float("inf")), "tools[0].timeout", "Input should be a finite"),
    (_with(tools__0__duration="-PT1M"), "tools[0].duration", "must not be negative (got -60 s)"),
    (
        _with(
            tools__0={
                "name": "x",
                "crud": {"collection": "tickets", "op": "get"},
                "params": {"id": {"minimum": True}},
            }
        ),
        "tools[0].params.id.minimum",
        "Input should be a valid number",
    ),
    (
        _with(
            clock={"start": "2026-03-02T09:00:00Z"},
            triggers=[{"id": "t", "when": {"type": "time", "every": "PT0.0001S"}, "actions": []}],
        ),
        "triggers[0].when.every",
        "must be at least 1 ms (got 0.0001 s)",
    ),
    (
        _with(
            clock={"start": "2026-03-02T09:00:00Z"},
            triggers=[{"id": "t", "when": {"type": "time", "offset": "-PT1H"}, "actions": []}],
        ),
        "triggers[0].when.offset",
        "must not be negative (got -3600 s)",
    ),
]


@pytest.mark.parametrize(
    ("doc", "path", "problem"), BAD_DOCUMENTS, ids=[p for _, p, _ in BAD_DOCUMENTS]
)
def test_a_bad_document_names_file_path_and_expectation(
    tmp_path: Path, doc: dict, path: str, problem: str
) -> None:
    file = write(tmp_path / "env.yaml", doc)
    with pytest.raises(DocumentError) as info:
        load_environment_spec(tmp_path)
    err = info.value
    assert err.file == str(file)
    assert err.path == path
    assert err.problem.startswith(problem)
    assert str(err).startswith(f"{file}: {path}: {problem}")


@pytest.mark.parametrize(
    ("changes", "path"),
    [
        ({"seed": {"tickets": [["T-1", "open"]]}}, "seed.tickets[0]"),
        ({"seed": {"tickets": 5}}, "seed.tickets"),
        ({"access": [{"role": "agent", "tools": "some"}]}, "access[0].tools"),
        (
            {
                "triggers": [
                    {
                        "id": "a",
                        "when": {"type": "time", "every": "soon"},
                        "actions": [{"type": "nl", "text": "x"}],
                    }
                ]
            },
            "triggers[0].when.every",
        ),
    ],
)
def test_a_bad_value_of_a_union_field_is_located_as_written(changes: dict, path: str) -> None:
    """Today these read `seed.tickets['list[dict[str,any]]'][0]`, `access[0].tools['list[str]']`
    and `triggers[0].when.every.timedelta`: names the user never wrote."""
    with pytest.raises(DocumentError) as info:
        parse_environment_spec(_with(**changes), "env.yaml")
    assert info.value.path == path


def test_several_problems_are_counted(tmp_path: Path) -> None:
    doc = _with(default_role="boss", access=[{"role": "ghost", "tools": "*"}], strict_roles=True)
    with pytest.raises(DocumentError) as info:
        parse_environment_spec(doc, "env.yaml")
    assert info.value.path == "default_role"
    assert info.value.more == 1
    assert str(info.value).endswith("(and 1 more problem)")


def test_parse_without_a_file_has_no_file_in_the_message() -> None:
    with pytest.raises(DocumentError) as info:
        parse_environment_spec(_with(kind="Task"))
    assert info.value.file is None
    assert str(info.value).startswith("kind: ")


# -- seed files ------------------------------------------------------------------------------


def _seeded(path: str) -> dict:
    return _with(seed={"tickets": path})


def test_seed_records_from_a_yaml_file(tmp_path: Path) -> None:
    write(tmp_path / "data" / "tickets.yaml", [{"id": "T-9", "status": "open"}])
    write(tmp_path / "env.yaml", _seeded("data/tickets.yaml"))
    spec, _ = load_environment_spec(tmp_path)
    assert spec.seed["tickets"] == [{"id": "T-9", "status": "open"}]


def test_seed_records_from_json_and_jsonl(tmp_path: Path) -> None:
    (tmp_path / "t.jsonl").write_text(
        '{"id": "A", "status": "open"}\n{"id": "B", "status": "closed"}\n'
    )
    write(tmp_path / "env.yaml", _seeded("t.jsonl"))
    assert [r["id"] for r in load_environment_spec(tmp_path)[0].seed["tickets"]] == ["A", "B"]
    # A mapping keyed by the collection's name is accepted too.
    write(tmp_path / "t.json", {"tickets": [{"id": "C", "status": "open"}]}, fmt="json")
    write(tmp_path / "env.yaml", _seeded("t.json"))
    assert load_environment_spec(tmp_path)[0].seed["tickets"] == [{"id": "C", "status": "open"}]


def test_seed_files_resolve_against_the_document_not_the_working_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "env" / "tickets.yaml", [{"id": "T-1", "status": "open"}])
    write(tmp_path / "env" / "env.yaml", _seeded("tickets.yaml"))
    monkeypatch.chdir(tmp_path)
    assert load_environment_spec("env")[0].seed["tickets"][0]["id"] == "T-1"


def test_a_missing_seed_file(tmp_path: Path) -> None:
    file = write(tmp_path / "env.yaml", _seeded("data/nope.yaml"))
    with pytest.raises(DocumentError) as info:
        load_environment_spec(tmp_path)
    err = info.value
    assert err.file == str(file)
    assert err.path == "seed.tickets"
    assert err.problem == f"seed file 'data/nope.yaml' not found (looked in {tmp_path})"


def test_a_seed_file_that_is_not_a_list(tmp_path: Path) -> None:
    seed = write(tmp_path / "t.yaml", {"other": [{"id": "x"}]})
    write(tmp_path / "env.yaml", _seeded("t.yaml"))
    with pytest.raises(DocumentError) as info:
        load_environment_spec(tmp_path)
    assert info.value.file == str(seed)
    assert info.value.problem == "expected a list of records"


def test_a_seed_file_with_a_syntax_error_names_the_seed_file(tmp_path: Path) -> None:
    (tmp_path / "t.json").write_text("[{]")
    write(tmp_path / "env.yaml", _seeded("t.json"))
    with pytest.raises(DocumentError) as info:
        load_environment_spec(tmp_path)
    assert info.value.file == str(tmp_path / "t.json")
    assert info.value.problem.startswith("invalid JSON")


def test_records_from_a_seed_file_are_checked_like_inline_ones(tmp_path: Path) -> None:
    write(tmp_path / "t.yaml", [{"id": "A", "status": "open"}, {"id": "A", "status": "open"}])
    write(tmp_path / "env.yaml", _seeded("t.yaml"))
    with pytest.raises(DocumentError) as info:
        load_environment_spec(tmp_path)
    assert info.value.path == "seed.tickets[1].id"
    assert info.value.problem == "duplicate key 'A'"
