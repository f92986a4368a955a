"""Hostile input to MCP over stdio: `agent-env serve ENV --stdio` run as a real subprocess,
driven line by line through its pipes (raw: what no client would send) and by the official
`mcp` client (reserved roles in `_meta`, both protocol eras).

Every line gets an answer: a line the SDK cannot parse (nested too deep, malformed, not
UTF-8, not a JSON-RPC message) is a JSON-RPC error (with the request's id when its opening
members name one), where the SDK alone would drop it and leave the client waiting; the
session goes on. There is no HTTP here, so no content types, Origin or Host to refuse, and
no role header: `_meta` is the only way to name a role.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError, StdioServerParameters, stdio_client

MODES = ["auto", "legacy"]
META_ROLE = "agentenv.io/role"
WAIT_S = 30
SERVE = [sys.executable, "-c", "from agentenv.cli import main; main()"]


@pytest.fixture(scope="module")
def env_dir(notes_env_dir: Path) -> Path:
    return notes_env_dir


def nested(depth: int, leaf: Any = 1) -> Any:
    """A value of `depth` levels of lists around `leaf` (built without recursion)."""
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


# -- a raw stdio session ---------------------------------------------------------------------


class RawStdio:
    """`agent-env serve ENV --stdio` with its pipes in our hands: write any bytes as a
    line, read each answer (a reader thread fills a queue, so a missing answer is a test
    failure after WAIT_S instead of a hang)."""

    def __init__(self, env_dir: Path, errlog: Path) -> None:
        self._errlog = errlog.open("wb")
        self.process = subprocess.Popen(
            [*SERVE, "serve", str(env_dir), "--stdio"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._errlog,
            cwd=env_dir,
        )
        self._answers: queue.Queue[bytes] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._next_id = 100

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._answers.put(line)

    def send(self, line: bytes) -> None:
        """Write one line (a newline is added)."""
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def answer(self) -> dict[str, Any]:
        """The next message the server writes."""
        try:
            line = self._answers.get(timeout=WAIT_S)
        except queue.Empty:
            raise AssertionError(f"no answer within {WAIT_S} s") from None
        return json.loads(line)

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a well-formed request and return its answer (checked to carry its id)."""
        self._next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(json.dumps(message).encode())
        answer = self.answer()
        assert answer["id"] == self._next_id, answer
        return answer

    def call(self, tool: str, arguments: dict[str, Any], **meta: str) -> dict[str, Any]:
        """tools/call; the answer's `result` or `error`."""
        params: dict[str, Any] = {"name": tool, "arguments": arguments}
        if meta:
            params["_meta"] = meta
        return self.request("tools/call", params)

    def close(self) -> None:
        """End the session as a client does: close stdin, wait for the process."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=WAIT_S)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            self._errlog.close()


@pytest.fixture(scope="module")
def stdio(env_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawStdio]:
    """One raw session past the `initialize` handshake, for the whole module: that it
    survives every test's hostile lines is part of what is tested."""
    tmp_path = tmp_path_factory.mktemp("stdio-log")
    session = RawStdio(env_dir, tmp_path / "server.log")
    try:
        init = session.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "hostile", "version": "0"},
            },
        )
        assert "result" in init, init
        session.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        yield session
    finally:
        session.close()
    assert session.process.returncode == 0, (tmp_path / "server.log").read_text()


def still_serving(stdio: RawStdio) -> None:
    """The same session answers a plain call, and the seed note is untouched."""
    read = stdio.call("get_note", {"note_id": "N-1"})
    assert read["result"]["structuredContent"] == {"id": "N-1", "text": "first"}, read


# -- lines too deep to parse -----------------------------------------------------------------

DEEP_LINES = [
    pytest.param(
        b'{"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"x": '
        + b"[" * 1000
        + b"]" * 1000
        + b"}}",
        id="params-1000",
    ),
    pytest.param(
        b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "keep", '
        b'"arguments": {"payload": {"deep": ' + json.dumps(nested(500)).encode() + b"}}}}",
        id="arguments-500",
    ),
    pytest.param(
        b'{"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"x": '
        + b"[" * 100_000
        + b"]" * 100_000
        + b"}}",
        id="params-100000",
    ),
    pytest.param(
        b'{"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"x": ' + b"{" * 3000,
        id="unterminated-3000",
    ),
]


@pytest.mark.parametrize("line", DEEP_LINES)
def test_a_line_nested_too_deep_is_answered_with_its_id_and_the_session_goes_on(
    stdio: RawStdio, line: bytes
) -> None:
    # Before: no answer at all (the SDK dropped the line), so the client waited forever.
    stdio.send(line)
    answer = stdio.answer()
    assert answer["id"] == 7, answer
    assert answer["error"]["code"] == -32700, answer
    assert answer["error"]["message"] == "the message is JSON nested deeper than 128 levels"
    assert answer["error"]["data"]["code"] == "too_deep"
    assert stdio.call("get_note", {"note_id": "K"})["result"]["isError"] is True  # no write
    still_serving(stdio)


def test_arguments_past_the_gateways_limit_are_a_tool_error(stdio: RawStdio) -> None:
    # Shallow enough to parse: the gateway holds arguments to 64 levels, as on every path.
    answer = stdio.call("keep", {"payload": {"deep": nested(100)}})
    assert answer["result"]["isError"] is True, answer
    assert "JSON nested deeper than 64 levels" in answer["result"]["content"][0]["text"]
    assert stdio.call("get_note", {"note_id": "K"})["result"]["isError"] is True  # no write
    at_limit = {"deep": nested(61)}  # arguments, payload, deep, 61 lists: 64 levels
    kept = stdio.call("keep", {"payload": at_limit})
    assert kept["result"]["structuredContent"] == at_limit, kept


# -- lines that are not JSON-RPC -------------------------------------------------------------

BAD_LINES = [
    pytest.param(b"{not json", None, -32700, id="not-json"),
    pytest.param(
        b'{"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {',
        5,
        -32700,
        id="truncated",
    ),
    # Read as UTF-8 with replacement characters: a method nobody has.
    pytest.param(
        b'{"jsonrpc": "2.0", "id": 6, "method": "tools/l\xff\xfeist"}', 6, -32601, id="not-utf8"
    ),
    pytest.param(
        b'{"jsonrpc": "2.0", "id": 8, "method": "tools/list"}\x00', 8, -32700, id="nul-byte"
    ),
    pytest.param(
        b'{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "add_note", '
        b'"arguments": {"note_id": "S", "text": "\\ud800"}}}',
        9,
        -32700,
        id="lone-surrogate",
    ),
    pytest.param(b"42", None, -32600, id="a-number"),
    pytest.param(
        b'{"jsonrpc": "1.0", "id": 3, "method": "tools/list"}', None, -32600, id="wrong-version"
    ),
]


@pytest.mark.parametrize(("line", "request_id", "code"), BAD_LINES)
def test_a_line_that_is_not_a_message_is_answered_and_the_session_goes_on(
    stdio: RawStdio, line: bytes, request_id: int | None, code: int
) -> None:
    stdio.send(line)
    answer = stdio.answer()
    assert answer.get("id") == request_id, answer
    assert answer["error"]["code"] == code, answer
    assert answer["error"]["message"], answer
    still_serving(stdio)


def test_nul_in_a_string_is_just_a_character(stdio: RawStdio) -> None:
    text = "before\x00after"
    added = stdio.call("add_note", {"note_id": "N\x00", "text": text})
    assert added["result"].get("isError") is not True, added
    read = stdio.call("get_note", {"note_id": "N\x00"})
    assert read["result"]["structuredContent"] == {"id": "N\x00", "text": text}


def test_a_huge_line_is_answered_and_the_session_goes_on(stdio: RawStdio) -> None:
    # No size limit on stdio (the user started this process): it is served.
    text = "x" * (4 * 1024 * 1024)
    added = stdio.call("add_note", {"note_id": "H", "text": text})
    assert added["result"]["structuredContent"]["text"] == text
    still_serving(stdio)


# -- reserved roles --------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["system", " system "])
def test_a_meta_role_of_system_is_refused_raw(stdio: RawStdio, role: str) -> None:
    # Before: `system` passed every access rule and the purge went through.
    answer = stdio.call("purge", {"note_id": "N-1"}, **{META_ROLE: role})
    assert answer["error"]["code"] == -32005, answer
    assert "the role 'system' is reserved for the gateway itself" in answer["error"]["message"]
    listed = stdio.request("tools/list", {"_meta": {META_ROLE: role}})
    assert listed["error"]["code"] == -32005, listed
    still_serving(stdio)


@contextlib.asynccontextmanager
async def sdk_stdio(env_dir: Path, log: Path, mode: str) -> AsyncIterator[Client]:
    """The official client spawning the server, as desktop clients do."""
    # The SDK passes the child only a few variables; PYTHONPATH too, so the server imports
    # what this test process does.
    path = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else None
    params = StdioServerParameters(
        command=SERVE[0],
        args=[*SERVE[1:], "serve", str(env_dir), "--stdio"],
        cwd=str(env_dir),
        env=path,
    )
    with log.open("w", encoding="utf-8") as errlog:
        async with Client(
            stdio_client(params, errlog=errlog),
            mode=mode,  # type: ignore[arg-type]
            cache=None,
            read_timeout_seconds=WAIT_S,
        ) as client:
            yield client


@pytest.mark.parametrize("mode", MODES)
async def test_a_meta_role_of_system_is_refused_through_the_sdk_client(
    env_dir: Path, tmp_path: Path, mode: str
) -> None:
    meta = {META_ROLE: "system"}
    async with sdk_stdio(env_dir, tmp_path / "server.log", mode) as client:
        with pytest.raises(MCPError) as listed:
            await client.list_tools(meta=meta)  # type: ignore[arg-type]
        with pytest.raises(MCPError) as called:
            await client.call_tool("purge", {"note_id": "N-1"}, meta=meta)
        for caught in (listed, called):
            assert caught.value.error.code == -32005
            assert "the role 'system' is reserved" in str(caught.value)
        # A supervisor may purge; the note was still there for it to purge.
        purged = await client.call_tool("purge", {"note_id": "N-1"}, meta={META_ROLE: "supervisor"})
        assert not purged.is_error, purged
        assert purged.structured_content == {"deleted": "N-1"}
