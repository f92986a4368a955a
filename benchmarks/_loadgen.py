"""A raw HTTP/1.1 keep-alive load generator, so a wire benchmark measures the server.

httpx and the MCP SDK client spend more CPU per call than our servers do, so a benchmark
driven by them measures its client. This one writes request bytes on a kept-alive socket
and parses only the status line, the headers it needs and the body (Content-Length or
chunked, which covers JSON answers and the SSE streams MCP answers POSTs with); about
30-60 µs of client CPU per call. It drives N connections from one event loop, each
sending its next request when the previous answer is in (no pipelining), and reports
calls/s and latency percentiles. The server runs in its own process; read its CPU per
call with `_cpu.process_cpu_seconds`.

    conn = await Connection.open("127.0.0.1", port)
    answer = await conn.request("POST", "/step", body, {"content-type": "application/json"})
    result = await load(host, port, lambda conn, i: conn.request(...), clients=32, calls=5000)
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field


@dataclass
class Answer:
    """One response: status, headers (lower-cased names) and the whole body."""

    status: int
    headers: dict[str, str]
    body: bytes


class Connection:
    """One kept-alive HTTP/1.1 connection; one request at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str):
        self._reader = reader
        self._writer = writer
        self._host = host.encode()
        self.headers: dict[str, str] = {}
        """Headers sent with every request of this connection (an MCP session id, say)."""

    @classmethod
    async def open(cls, host: str, port: int) -> Connection:
        """Connect to host:port."""
        reader, writer = await asyncio.open_connection(host, port, limit=1 << 22)
        return cls(reader, writer, f"{host}:{port}")

    async def request(
        self,
        method: str,
        path: str,
        body: bytes = b"",
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        """Send one request and read its whole answer."""
        lines = [f"{method} {path} HTTP/1.1".encode(), b"host: " + self._host]
        for name, value in {**self.headers, **(headers or {})}.items():
            lines.append(f"{name}: {value}".encode())
        if body or method in ("POST", "PUT", "PATCH"):
            lines.append(b"content-length: " + str(len(body)).encode())
        self._writer.write(b"\r\n".join(lines) + b"\r\n\r\n" + body)
        head = await self._reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = head[:-4].split(b"\r\n")
        status = int(status_line.split(b" ", 2)[1])
        found: dict[str, str] = {}
        for line in header_lines:
            name, _, value = line.partition(b":")
            found[name.strip().lower().decode()] = value.strip().decode()
        if "content-length" in found:
            data = await self._reader.readexactly(int(found["content-length"]))
        elif found.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            while True:
                size_line = await self._reader.readuntil(b"\r\n")
                size = int(size_line.split(b";")[0], 16)
                chunk = await self._reader.readexactly(size + 2)
                if size == 0:
                    break
                parts.append(chunk[:-2])
            data = b"".join(parts)
        else:  # no length: the body runs to the end of the connection
            data = await self._reader.read()
        return Answer(status, found, data)

    async def close(self) -> None:
        """Close the connection."""
        self._writer.close()
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()


Call = Callable[[Connection, int], Awaitable[Answer]]
Setup = Callable[[Connection], Awaitable[None]]


@dataclass
class LoadResult:
    """What a load run measured."""

    calls: int
    seconds: float
    latencies_ms: list[float] = field(repr=False, default_factory=list)
    errors: int = 0

    @property
    def rate(self) -> float:
        """Calls per second."""
        return self.calls / self.seconds

    def percentile(self, q: float) -> float:
        """Latency at quantile q (0..1), in ms."""
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    @property
    def p50(self) -> float:
        """Median latency, ms."""
        return statistics.median(self.latencies_ms)

    @property
    def p99(self) -> float:
        """99th percentile latency, ms."""
        return self.percentile(0.99)


async def load(
    host: str,
    port: int,
    call: Call,
    *,
    clients: int = 1,
    calls: int = 1000,
    warmup: int = 20,
    setup: Setup | None = None,
    ok: Callable[[Answer], bool] = lambda a: a.status == 200,
) -> LoadResult:
    """`calls` calls spread over `clients` kept-alive connections, each waiting for its
    answer before the next; `setup` runs once per connection first (an MCP handshake, say),
    then `warmup` calls per connection that are not measured."""
    conns = [await Connection.open(host, port) for _ in range(clients)]
    try:
        for conn in conns:
            if setup is not None:
                await setup(conn)
            for i in range(warmup):
                answer = await call(conn, i)
                if not ok(answer):
                    raise RuntimeError(
                        f"warm-up call failed: {answer.status} {answer.body[:300]!r}"
                    )
        latencies: list[float] = []
        errors = 0
        next_index = 0

        async def client(conn: Connection) -> None:
            nonlocal next_index, errors
            while next_index < calls:
                i = next_index
                next_index += 1
                start = time.perf_counter()
                answer = await call(conn, i)
                latencies.append((time.perf_counter() - start) * 1000)
                if not ok(answer):
                    errors += 1

        start = time.perf_counter()
        await asyncio.gather(*(client(conn) for conn in conns))
        elapsed = time.perf_counter() - start
    finally:
        for conn in conns:
            await conn.close()
    return LoadResult(len(latencies), elapsed, latencies, errors)
