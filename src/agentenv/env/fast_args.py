"""A fast path for validating the flat, simple arguments most tool calls carry.

`Tool.args_model.model_validate` (pydantic) costs about 1.5 µs a call, most of it building
the model instance the gateway then takes apart again. For a tool whose parameters are all
of a handful of plain types (`str`, `int`, `float`, `bool`, `Any`, bare `list` and `dict`,
`Literal[...]` of strings or ints, unions of these with each other and with None), with no
constraints, aliases or validators, `FastArgs` checks the arguments itself.

It never says no: it either gives exactly what pydantic would give (the same values, in the
model's field order) or None, and then the gateway asks pydantic, which gives its verdict
and its messages. So it only accepts what pydantic accepts unchanged: a value of exactly a
declared type (no subclasses, no coercions: `"5"` for an int, `True` for an int, `5` for a
float all go to pydantic), no unknown or missing arguments. Bare `list` and `dict` values are
copied one level, as pydantic does. tests/env/test_tool.py compares the two over many inputs.
"""

from __future__ import annotations

import operator
import types
import typing
from typing import Any, Literal

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel
from pydantic_core import PydanticUndefined


class _Required:
    """The default of a required field (a class: it pickles as itself, by reference)."""


class _AnyValue:
    """What a field of type Any accepts: every value, kept as it is."""


_REQUIRED: Any = _Required
_NONE = type(None)
_LITERAL_KINDS = (str, int, _NONE)
_BOUNDS = {
    Ge: ("ge", operator.ge),
    Gt: ("gt", operator.gt),
    Le: ("le", operator.le),
    Lt: ("lt", operator.lt),
}
_ANY: Any = _AnyValue
_PLAIN = {str: (str,), int: (int,), float: (float,), bool: (bool,), list: (list,), dict: (dict,)}
_IMMUTABLE_DEFAULTS = (_NONE, bool, int, float, str)
_CONFIG_KEYS = {"extra", "title", "protected_namespaces", "json_schema_extra", "defer_build"}


class FastArgs:
    """The fast argument check of one args model (see the module docstring)."""

    __slots__ = ("_fields", "flat")

    def __init__(self, fields: list[tuple[str, Any, Any, Any]]) -> None:
        # (name, accepted, default, bounds): accepted is a tuple of exact types, a frozenset
        # of (type, value) pairs (a Literal) or _ANY; bounds None or ((operator, limit), ...)
        self._fields = fields
        self.flat = not any(
            accepted is _ANY or (type(accepted) is tuple and (list in accepted or dict in accepted))
            for _, accepted, _, _ in fields
        )
        """No field takes a container: arguments it accepts are flat (nothing nests)."""

    @classmethod
    def of(cls, model: type[BaseModel]) -> FastArgs | None:
        """The fast check for `model`, or None when some field is not simple enough."""
        config = model.model_config
        if config.get("extra") != "forbid" or not set(config) <= _CONFIG_KEYS:
            return None  # any other setting may change what pydantic accepts
        if _has_validators(model):
            return None
        fields: list[tuple[str, Any, Any, Any]] = []
        for name, info in model.model_fields.items():
            if info.alias or info.validation_alias or info.default_factory:
                return None
            accepted = _accepted(info.annotation)
            if accepted is None:
                return None
            bounds = _bounds(info.metadata, accepted)
            if bounds is False:
                return None
            default = info.default
            if default is PydanticUndefined:
                default = _REQUIRED
            elif type(default) not in _IMMUTABLE_DEFAULTS:
                return None  # pydantic copies mutable defaults; leave those to it
            fields.append((name, accepted, default, bounds))
        return cls(fields)

    def __call__(self, args: dict[str, Any]) -> dict[str, Any] | None:
        """The validated values (every field, in order), or None: ask pydantic."""
        values: dict[str, Any] = {}
        given = 0
        for name, accepted, default, bounds in self._fields:
            if name in args:
                value = args[name]
                given += 1
                kind = type(value)
                if accepted is _ANY:
                    pass
                elif type(accepted) is tuple:
                    if kind not in accepted:
                        return None
                    if kind is list:
                        value = list(value)
                    elif kind is dict:
                        value = dict(value)
                    elif bounds is not None and kind is not _NONE:
                        for within, limit in bounds:
                            if not within(value, limit):
                                return None
                elif kind not in _LITERAL_KINDS or (kind, value) not in accepted:
                    return None
                values[name] = value
            elif default is _REQUIRED:
                return None
            else:
                values[name] = default
        if given != len(args):
            return None  # an unknown argument (or a key that is not a field name)
        return values


def _has_validators(model: type[BaseModel]) -> bool:
    decorators = model.__pydantic_decorators__
    return any(
        (
            decorators.validators,
            decorators.field_validators,
            decorators.root_validators,
            decorators.model_validators,
        )
    )


def _bounds(metadata: list[Any], accepted: Any) -> Any:
    """A field's numeric bounds as ((operator, limit), ...); None for none; False when
    its constraints are not ones the fast path checks (then pydantic does it all)."""
    if not metadata:
        return None
    if type(accepted) is not tuple or not set(accepted) <= {int, float, _NONE}:
        return False
    out = []
    for item in metadata:
        found = _BOUNDS.get(type(item))
        if found is None:
            return False
        attribute, within = found
        limit = getattr(item, attribute)
        if type(limit) not in (int, float):
            return False
        out.append((within, limit))
    return tuple(out)


def _accepted(annotation: Any) -> Any:
    """What a field of this type accepts on the fast path, or None (not simple enough)."""
    if annotation is Any:
        return _ANY
    plain = _PLAIN.get(annotation)
    if plain is not None:
        return plain
    if annotation is None or annotation is _NONE:
        return (_NONE,)
    origin = typing.get_origin(annotation)
    if origin is Literal:
        values = typing.get_args(annotation)
        if not all(type(v) in (str, int) for v in values):
            return None  # bools, enums, bytes, None: pydantic's rules, not ours
        return frozenset((type(v), v) for v in values)
    if origin is typing.Union or origin is types.UnionType:
        parts = [_accepted(a) for a in typing.get_args(annotation)]
        if any(p is None or p is _ANY for p in parts):
            return None
        if any(type(p) is frozenset for p in parts):
            # A Literal or None (an optional enum): the pairs, None among them.
            if not all(type(p) is frozenset or p == (_NONE,) for p in parts):
                return None
            return frozenset().union(
                *(p if type(p) is frozenset else {(_NONE, None)} for p in parts)
            )
        kinds = tuple(k for p in parts for k in p)
        if (list in kinds or dict in kinds) and len(kinds) > 1 + (_NONE in kinds):
            return None  # a union over containers: pydantic's smart-union rules decide
        return kinds
    return None
