"""Running one command as a child process within `SandboxLimits`: rlimits set before it
executes, its own session (so a timeout kills the whole process group, children included),
output read up to a cap while the rest is drained and dropped.

The rlimits are set by util-linux's `prlimit` in front of the command (it sets them, then
execs the command) where it is installed, as on every Debian: a `preexec_fn` would do the
same but makes Python fork the whole interpreter instead of spawning, which measured about
5 ms more per command here. Without `prlimit`, `preexec_fn` it is."""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import shutil
import signal
import time
from collections.abc import Mapping, Sequence

from agentenv.sandbox.base import ExecResult, SandboxError, SandboxLimits

_BASE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
}
_MB = 1024 * 1024


def base_env(home: str, extra: Mapping[str, str] | None) -> dict[str, str]:
    """The variables a command gets: a minimal set (LANG, HOME, TMPDIR) plus `extra`, and the
    caller's PATH, so that a program is found as it is in the caller's shell (`python` of
    pyenv, a virtualenv's tools); nothing else of ours leaks in (no tokens, no
    `VIRTUAL_ENV`, no proxy settings)."""
    path = os.environ.get("PATH") or _BASE_ENV["PATH"]
    return {**_BASE_ENV, "PATH": path, "HOME": home, "TMPDIR": "/tmp", **(extra or {})}


def _prlimit_args(limits: SandboxLimits) -> list[str]:
    """`prlimit` and its options for these limits (soft = hard)."""
    program = shutil.which("prlimit")
    assert program is not None
    values = {
        "--cpu": limits.cpu_seconds,
        "--as": limits.memory_mb * _MB,
        "--nproc": limits.processes,
        "--fsize": limits.file_size_mb * _MB,
        "--core": 0,
    }
    return [program, *(f"{flag}={v}:{v}" for flag, v in values.items()), "--"]


def _limiter(limits: SandboxLimits) -> object:
    """What runs in the child before exec: the rlimits (hard = soft, so it cannot raise them)."""
    pairs = [
        (resource.RLIMIT_CPU, limits.cpu_seconds),
        (resource.RLIMIT_AS, limits.memory_mb * _MB),
        (resource.RLIMIT_NPROC, limits.processes),
        (resource.RLIMIT_FSIZE, limits.file_size_mb * _MB),
        (resource.RLIMIT_CORE, 0),
    ]

    def apply() -> None:
        for which, value in pairs:
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(which, (value, value))

    return apply


async def read_capped(stream: asyncio.StreamReader | None, cap: int) -> tuple[bytes, bool]:
    """Up to `cap` bytes of a stream, then the rest drained and dropped; (kept, truncated)."""
    if stream is None:
        return b"", False
    kept = bytearray()
    truncated = False
    while chunk := await stream.read(65536):
        room = cap - len(kept)
        if room > 0:
            kept += chunk[:room]
        if len(chunk) > room:
            truncated = True
    return bytes(kept), truncated


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def run_limited(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    limits: SandboxLimits,
    timeout: float | None = None,
    stdin: str | bytes | None = None,
) -> ExecResult:
    """Run `argv` within `limits`; a timeout kills its process group (exit_code None)."""
    began = time.perf_counter()
    data = stdin.encode() if isinstance(stdin, str) else stdin
    spawn: dict[str, object] = {}
    if shutil.which("prlimit") is not None:
        argv = [*_prlimit_args(limits), *argv]
    else:
        spawn["preexec_fn"] = _limiter(limits)
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=dict(env),
            stdin=asyncio.subprocess.PIPE if data is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            **spawn,  # type: ignore[arg-type]
        )
    except (OSError, ValueError) as exc:
        raise SandboxError(f"cannot start {argv[0]!r}: {exc}") from None
    if data is not None and proc.stdin is not None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            proc.stdin.write(data)
            await proc.stdin.drain()
        proc.stdin.close()
    readers = asyncio.gather(
        read_capped(proc.stdout, limits.output_bytes), read_capped(proc.stderr, limits.output_bytes)
    )
    timed_out = False
    exit_code: int | None
    try:
        exit_code = await asyncio.wait_for(proc.wait(), timeout or limits.timeout)
    except TimeoutError:
        timed_out = True
        _kill_group(proc.pid)
        await proc.wait()
        exit_code = None
    except BaseException:
        _kill_group(proc.pid)
        readers.cancel()
        with contextlib.suppress(BaseException):
            await proc.wait()
        raise
    # What it left running in the background goes too (and lets go of the pipes).
    _kill_group(proc.pid)
    (out, out_cut), (err, err_cut) = await readers
    return ExecResult(
        exit_code=exit_code,
        stdout=out.decode("utf-8", "replace"),
        stderr=err.decode("utf-8", "replace"),
        timed_out=timed_out,
        truncated=out_cut or err_cut,
        duration_s=time.perf_counter() - began,
    )
