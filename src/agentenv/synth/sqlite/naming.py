"""Names: SQL table and column names made into collection, field, tool and type names.

Snake case (accents dropped, camel case split), a trailing `_` for Python keywords and
the names generated tools reserve, English singulars for tool names (`books` ->
`get_book`), CamelCase for `Literal` aliases, and `_unique` against names already taken.
`_qi` quotes a name back into SQL.
"""

from __future__ import annotations

import keyword
import re
import unicodedata

_RESERVED_FIELDS = {"ctx", "clear", "limit", "offset", "query", "self"}
_IRREGULAR = {
    "people": "person",
    "children": "child",
    "movies": "movie",
    "cookies": "cookie",
    "series": "series",
    "species": "species",
    "news": "news",
    "data": "data",
    "statuses": "status",
    "analyses": "analysis",
}


def _snake(name: str, fallback: str) -> str:
    name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()  # é -> e
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", s)
    s = re.sub(r"[^A-Za-z0-9]+", "_", s).strip("_").lower()
    s = re.sub(r"_+", "_", s) or fallback
    return f"{fallback}_{s}" if s[0].isdigit() else s


def _field_name(name: str) -> str:
    s = _snake(name, "col")
    return f"{s}_" if keyword.iskeyword(s) or s in _RESERVED_FIELDS else s


def _singular(name: str) -> str:
    head, _, last = name.rpartition("_")
    word = last
    if word in _IRREGULAR:
        word = _IRREGULAR[word]
    elif word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith(("sses", "shes", "ches", "xes")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
        word = word[:-1]
    return f"{head}_{word}" if head else word


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_") if part)


def _unique(name: str, taken: set[str]) -> str:
    candidate, n = name, 2
    while candidate in taken:
        candidate, n = f"{name}_{n}", n + 1
    taken.add(candidate)
    return candidate


def _qi(name: str) -> str:
    """A quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'
