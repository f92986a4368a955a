"""Workspaces (issue 14): fork, tree hash and the `bash` tool, each against a baseline
measured in the same run.

    python benchmarks/bench_workspace.py            # 1,000 files of 20 KB (20 MB)
    python benchmarks/bench_workspace.py --quick    # fewer rounds

1. Fork of a 1,000-file, 20 MB workspace: a new gateway instance (its tree is record state,
   forked copy-on-write) against `cp -r` of the same folder; and, since the first `bash`
   of an instance writes its tree out to a folder, that first call too.
2. Tree hash after a one-file change, on trees of 1,000 and 10,000 files, against hashing
   every file (SHA-256 of all contents, what a tree hash costs without our bookkeeping).
3. `bash` tool overhead per call (`true`) on the 1,000-file tree, local and bwrap, against
   `subprocess.run(["bash", "-c", "true"])`; the difference is the gateway, the sync of
   the folder to the state, and the scan for changes.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import yaml

from agentenv import Environment
from agentenv.env import Principal
from agentenv.gateway import Gateway
from agentenv.sandbox import BwrapProvider


def make_tree(root: Path, files: int, size: int, seed: int = 0) -> None:
    """`files` text files of `size` bytes in 20 folders."""
    rng = random.Random(seed)
    alphabet = "abcdefghijklmnopqrstuvwxyz     \n"
    for i in range(files):
        folder = root / f"pkg{i % 20:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"mod{i:05d}.py").write_text("".join(rng.choices(alphabet, k=size)))


def make_env(root: Path, provider: str) -> Environment:
    doc = {
        "apiVersion": "agentenv/v1",
        "kind": "Environment",
        "name": "bench",
        "workspace": {"seed": {"folder": str(root / "tree")}, "sandbox": {"provider": provider}},
    }
    (root / f"{provider}.yaml").write_text(yaml.safe_dump(doc))
    return Environment.load(root / f"{provider}.yaml")


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    opts = parser.parse_args()
    rounds = 5 if opts.quick else 15
    load = os.getloadavg()
    print(
        f"at the start: load {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}, {os.cpu_count()} cores"
    )
    work = Path(tempfile.mkdtemp(prefix="agentenv-bench-ws-"))
    try:
        make_tree(work / "tree", 1000, 20_000)
        began = time.perf_counter()
        env = make_env(work, "local")
        print(f"load: 1,000 files, 20 MB -> records in {time.perf_counter() - began:.2f} s")
        gw = Gateway(env)
        loop = asyncio.new_event_loop()
        agent = Principal("default")

        # 1. fork vs cp -r
        cp, fork, first = [], [], []
        for i in range(rounds):
            target = work / f"copy{i}"
            t = time.perf_counter()
            subprocess.run(["cp", "-r", str(work / "tree"), str(target)], check=True)
            cp.append(time.perf_counter() - t)
            shutil.rmtree(target)
            t = time.perf_counter()
            inst = gw.create_instance(f"f{i}")
            fork.append(time.perf_counter() - t)
            t = time.perf_counter()
            done = loop.run_until_complete(
                gw.call(agent, "bash", {"command": "true"}, instance=inst.id)
            )
            first.append(time.perf_counter() - t)
            assert done.ok, done.error
            gw.drop_instance(inst.id)
        print("\n1. fork of a 1,000-file, 20 MB workspace (medians)")
        print(f"   cp -r                     {median_ms(cp):9.3f} ms   20 MB on disk")
        print(
            f"   new instance (fork)       {median_ms(fork):9.3f} ms   0 bytes on disk   "
            f"{median_ms(cp) / median_ms(fork):7.0f}x faster than cp -r"
        )
        print(
            f"   its first bash call       {median_ms(first):9.3f} ms   writes the tree out "
            f"({median_ms(first) / median_ms(cp):.2f}x cp -r)"
        )

        # 2. tree hash after one change
        print("\n2. tree hash after a one-file change (medians)")
        for files in (1000, 10_000):
            root = work / f"hash{files}"
            make_tree(root / "tree", files, 2_000, seed=files)
            big = make_env(root, "local")
            state = big.new_state()
            ours, full = [], []
            for i in range(rounds):
                t = time.perf_counter()
                state.put(
                    "files",
                    {
                        "path": "pkg00/mod00000.py",
                        "mode": "100644",
                        "content": f"v{i}",
                        "encoding": "utf-8",
                    },
                )
                state.collection_hash("files")
                ours.append(time.perf_counter() - t)
                t = time.perf_counter()
                digest = hashlib.sha256()
                for record in state.list("files"):
                    digest.update(record["path"].encode())
                    digest.update(record["content"].encode())
                digest.hexdigest()
                full.append(time.perf_counter() - t)
            print(
                f"   {files:6,} files: ours {median_ms(ours) * 1000:8.1f} us   hash every file "
                f"{median_ms(full):8.2f} ms   ({median_ms(full) / median_ms(ours):,.0f}x)"
            )

        # 3. bash overhead
        print("\n3. bash tool per call, `true`, on the 1,000-file tree (medians)")
        base = []
        for _ in range(rounds * 4):
            t = time.perf_counter()
            subprocess.run(["bash", "-c", "true"], cwd=work, capture_output=True, check=True)
            base.append(time.perf_counter() - t)
        print(f"   subprocess.run            {median_ms(base):9.3f} ms   1.00x")
        providers = ["local"] + (["bwrap"] if BwrapProvider.unavailable() is None else [])
        for provider in providers:
            penv = env if provider == "local" else make_env(work, provider)
            pgw = Gateway(penv)
            loop.run_until_complete(pgw.call(agent, "bash", {"command": "true"}))  # writes the tree
            calls = []
            for _ in range(rounds * 4):
                t = time.perf_counter()
                done = loop.run_until_complete(pgw.call(agent, "bash", {"command": "true"}))
                calls.append(time.perf_counter() - t)
                assert done.ok, done.error
            print(
                f"   bash tool ({provider:5})         {median_ms(calls):9.3f} ms   "
                f"{median_ms(calls) / median_ms(base):.2f}x"
            )
        loop.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
