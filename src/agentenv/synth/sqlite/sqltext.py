"""SQL text: a tokenizer, and the CHECK constraints and column defaults read from it.

SQLite hands back a table's CREATE statement and each column's default as text; this
module reads what the environment can keep from them. `check_constraints` finds the CHECK
clauses of a CREATE TABLE, `parse_check` turns one into JSON-schema rules per column (or
None when it says more than that), and `parse_default` classifies a default as a value,
the current time, or an expression the environment does not evaluate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+|--[^\n]*|/\*.*?\*/)
   |(?P<str>'(?:[^']|'')*')
   |(?P<qid>"(?:[^"]|"")*"|\[[^\]]*\]|`(?:[^`]|``)*`)
   |(?P<num>0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
   |(?P<word>[A-Za-z_][A-Za-z0-9_$]*)
   |(?P<op><=|>=|<>|!=|==|\|\||[-+*/%<>=(),.;~&|])
   |(?P<other>.)
    """,
    re.S | re.X,
)


@dataclass(frozen=True)
class _Tok:
    kind: str
    text: str
    start: int
    end: int

    @property
    def upper(self) -> str:
        return self.text.upper() if self.kind == "word" else ""


def _tokens(sql: str) -> list[_Tok]:
    out = []
    for m in _TOKEN.finditer(sql):
        kind = m.lastgroup or "other"
        if kind != "ws":
            out.append(_Tok(kind, m.group(), m.start(), m.end()))
    return out


def _literal(tok: _Tok) -> tuple[bool, Any]:
    if tok.kind == "str":
        return True, tok.text[1:-1].replace("''", "'")
    if tok.kind == "num":
        text = tok.text
        if text.lower().startswith("0x"):
            return True, int(text, 16)
        return True, float(text) if any(c in text for c in ".eE") else int(text)
    if tok.upper in ("TRUE", "FALSE"):
        return True, tok.upper == "TRUE"
    if tok.upper == "NULL":
        return True, None
    return False, None


def _ident(tok: _Tok) -> str | None:
    if tok.kind == "word":
        return tok.text
    if tok.kind == "qid":
        inner = tok.text[1:-1]
        return inner.replace('""', '"') if tok.text[0] == '"' else inner.replace("``", "`")
    return None


def check_constraints(sql: str) -> list[tuple[str, list[_Tok]]]:
    """The CHECK constraints of a CREATE TABLE statement: (their text, their body's tokens)."""
    toks = _tokens(sql)
    found = []
    i = 0
    while i < len(toks):
        if toks[i].upper == "CHECK" and i + 1 < len(toks) and toks[i + 1].text == "(":
            depth, j = 0, i + 1
            while j < len(toks):
                depth += {"(": 1, ")": -1}.get(toks[j].text, 0)
                if depth == 0:
                    break
                j += 1
            end = toks[min(j, len(toks) - 1)].end
            found.append((sql[toks[i].start : end], toks[i + 2 : j]))
            i = j
        i += 1
    return found


def _split_top(toks: list[_Tok], word: str) -> list[list[_Tok]]:
    parts: list[list[_Tok]] = [[]]
    depth, between = 0, False
    for tok in toks:
        depth += {"(": 1, ")": -1}.get(tok.text, 0)
        if depth == 0 and tok.upper == "BETWEEN":
            between = True
        if depth == 0 and tok.upper == word:
            if word == "AND" and between:
                between = False
            else:
                parts.append([])
                continue
        parts[-1].append(tok)
    return parts


def _strip_parens(toks: list[_Tok]) -> list[_Tok]:
    while len(toks) >= 2 and toks[0].text == "(" and toks[-1].text == ")":
        depth = 0
        for i, tok in enumerate(toks):
            depth += {"(": 1, ")": -1}.get(tok.text, 0)
            if depth == 0 and i < len(toks) - 1:
                return toks
        toks = toks[1:-1]
    return toks


def _number(toks: list[_Tok]) -> tuple[bool, float | int | None]:
    sign = 1
    if toks and toks[0].text in ("-", "+"):
        sign = -1 if toks[0].text == "-" else 1
        toks = toks[1:]
    if len(toks) == 1 and toks[0].kind == "num":
        ok, value = _literal(toks[0])
        return ok, sign * value
    return False, None


_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
_BOUND = {">=": "minimum", ">": "exclusiveMinimum", "<=": "maximum", "<": "exclusiveMaximum"}


def parse_check(body: list[_Tok]) -> list[tuple[str, dict[str, Any]]] | None:
    """Column rules from a CHECK body, or None if it says more than we can keep.

    Understood: `col IN (literals)`, comparisons of a column with a number, `col BETWEEN
    a AND b`, `length(col)` compared with a number, `col <> ''`, `col IS NOT NULL`, any
    of these joined by AND, and `col IS NULL OR <those>`. Each rule is (column, JSON
    schema keywords).
    """
    alternatives = _split_top(_strip_parens(body), "OR")
    if len(alternatives) == 2:
        first, second = (_strip_parens(a) for a in alternatives)
        if _is_null_test(first):
            alternatives = [second]
        elif _is_null_test(second):
            alternatives = [first]
    if len(alternatives) != 1:
        return None
    rules: list[tuple[str, dict[str, Any]]] = []
    for part in _split_top(_strip_parens(alternatives[0]), "AND"):
        rule = _conjunct(_strip_parens(part))
        if rule is None:
            return None
        if rule[1]:
            rules.append(rule)
    return rules


def _is_null_test(toks: list[_Tok]) -> bool:
    return (
        len(toks) == 3
        and _ident(toks[0]) is not None
        and [t.upper for t in toks[1:]] == ["IS", "NULL"]
    )


def _conjunct(toks: list[_Tok]) -> tuple[str, dict[str, Any]] | None:
    if not toks:
        return None
    words = [t.upper for t in toks]
    col = _ident(toks[0])
    # col IN ('a', 'b', ...)
    if col and len(toks) >= 4 and words[1] == "IN" and toks[2].text == "(" and toks[-1].text == ")":
        values = []
        for item in _split_commas(toks[3:-1]):
            ok, value = (False, None)
            if len(item) == 1:
                ok, value = _literal(item[0])
            else:
                ok, value = _number(item)
            if not ok:
                return None
            if value is not None:
                values.append(value)
        return (col, {"enum": list(dict.fromkeys(values))}) if values else None
    # col IS NOT NULL
    if col and words[1:] == ["IS", "NOT", "NULL"]:
        return col, {}
    # col BETWEEN a AND b
    if col and len(toks) >= 5 and words[1] == "BETWEEN":
        rest = toks[2:]
        split = next((i for i, t in enumerate(rest) if t.upper == "AND"), None)
        if split is None:
            return None
        ok_low, low = _number(rest[:split])
        ok_high, high = _number(rest[split + 1 :])
        return (col, {"minimum": low, "maximum": high}) if ok_low and ok_high else None
    # col <> ''
    if col and len(toks) == 3 and toks[1].text in ("<>", "!=") and toks[2].text == "''":
        return col, {"minLength": 1}
    # length(col) op n
    if words[0] == "LENGTH" and len(toks) >= 6 and toks[1].text == "(" and toks[3].text == ")":
        inner = _ident(toks[2])
        op = toks[4].text
        ok, n = _number(toks[5:])
        if inner is None or not ok or op not in _BOUND or not isinstance(n, int):
            return None
        key = {
            ">": ("minLength", n + 1),
            ">=": ("minLength", n),
            "<": ("maxLength", n - 1),
            "<=": ("maxLength", n),
        }
        name, value = key[op]
        return inner, {name: max(value, 0)}
    # col op n, n op col
    for i, tok in enumerate(toks):
        if tok.text in _BOUND:
            left, right = toks[:i], toks[i + 1 :]
            if len(left) == 1 and _ident(left[0]) and left[0].kind in ("word", "qid"):
                ok, n = _number(right)
                return (_ident(left[0]) or "", {_BOUND[tok.text]: n}) if ok else None
            if len(right) == 1 and _ident(right[0]):
                ok, n = _number(left)
                return (_ident(right[0]) or "", {_BOUND[_FLIP[tok.text]]: n}) if ok else None
            return None
    return None


def _split_commas(toks: list[_Tok]) -> list[list[_Tok]]:
    items: list[list[_Tok]] = [[]]
    depth = 0
    for tok in toks:
        depth += {"(": 1, ")": -1}.get(tok.text, 0)
        if tok.text == "," and depth == 0:
            items.append([])
        else:
            items[-1].append(tok)
    return [i for i in items if i]


_NOW_WORDS = {"CURRENT_TIMESTAMP": "timestamp", "CURRENT_DATE": "date", "CURRENT_TIME": "time"}
_NOW_FUNCS = {"DATETIME": "timestamp", "DATE": "date", "TIME": "time"}


def parse_default(text: str) -> tuple[str, Any]:
    """A column's SQL default as ('value', v), ('now', kind) or ('expr', text)."""
    toks = _strip_parens(_tokens(text))
    if len(toks) == 1:
        if toks[0].upper in _NOW_WORDS:
            return "now", _NOW_WORDS[toks[0].upper]
        ok, value = _literal(toks[0])
        if ok:
            return "value", value
    ok, value = _number(toks)
    if ok:
        return "value", value
    # datetime('now'), date('now'), time('now')
    if (
        len(toks) == 4
        and toks[0].upper in _NOW_FUNCS
        and toks[1].text == "("
        and toks[2].text.lower() == "'now'"
        and toks[3].text == ")"
    ):
        return "now", _NOW_FUNCS[toks[0].upper]
    return "expr", text
