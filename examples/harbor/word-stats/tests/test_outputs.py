"""Checks /app/out against counts computed here from a copy of /app/data.

The copy (tests/data, mounted at /tests/data) is the data as built: the agent can change
/app/data, and outputs made to match changed data must not pass.
"""

import collections
import json
import pathlib
import re
import sys

data = sorted(pathlib.Path("/tests/data").glob("*.txt"))
words = [w for f in data for w in re.findall(r"[a-z]+", f.read_text().lower())]
counts = collections.Counter(words)
expected = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
problems = []
try:
    lines = pathlib.Path("/app/out/counts.tsv").read_text().splitlines()
    got = [(w, int(c)) for w, c in (line.split("\t") for line in lines)]
    if got != expected:
        problems.append(f"counts.tsv differs: {got[:3]} ... vs {expected[:3]} ...")
except (OSError, ValueError) as exc:
    problems.append(f"counts.tsv: {exc}")
try:
    summary = json.loads(pathlib.Path("/app/out/summary.json").read_text())
    want = {"files": len(data), "words": len(words), "top": expected[0][0]}
    if summary != want:
        problems.append(f"summary.json is {summary}, expected {want}")
except (OSError, ValueError) as exc:
    problems.append(f"summary.json: {exc}")
print("\n".join(problems) or "all outputs are right")
sys.exit(1 if problems else 0)
