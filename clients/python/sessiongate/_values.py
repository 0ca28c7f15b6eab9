"""Conversion between Python values and google.protobuf.Value.

google.protobuf.Value holds JSON, and its numbers are IEEE-754 doubles. So:

* an ``int`` is sent exactly only if ``abs(n) <= 2**53``; a larger one raises
  ``ValueError`` rather than being rounded in silence;
* a number received is returned as ``int`` when it is integral and within
  2**53, else as ``float`` — so ``3`` comes back as ``3`` (and so does ``3.0``:
  the wire cannot tell them apart);
* ``float('nan')`` and infinities are not JSON and raise ``ValueError``;
* mapping keys must be ``str``; tuples are sent as lists;
* google.protobuf.Struct keeps no key order, so objects come back as dicts
  with their keys sorted;
* JSON that has no google.protobuf.Value form (a number beyond float64,
  invalid UTF-8) arrives as its raw text, which is parsed with :mod:`json`:
  there, integers of any size are exact.
"""

from __future__ import annotations

import json
import math
from typing import Any, Mapping

from google.protobuf import struct_pb2

MAX_EXACT_INT = 2**53
"""The largest integer magnitude a google.protobuf.Value number holds exactly."""


def to_value(obj: Any, out: "struct_pb2.Value | None" = None) -> struct_pb2.Value:
    """Return obj (JSON-like Python data) as a google.protobuf.Value."""
    v = struct_pb2.Value() if out is None else out
    if obj is None:
        v.null_value = struct_pb2.NULL_VALUE
    elif isinstance(obj, bool):
        v.bool_value = obj
    elif isinstance(obj, int):
        if abs(obj) > MAX_EXACT_INT:
            raise ValueError(
                f"integer {obj} is beyond 2**53 and would be rounded: google.protobuf.Value numbers are doubles"
            )
        v.number_value = obj
    elif isinstance(obj, float):
        if not math.isfinite(obj):
            raise ValueError(f"{obj} is not a JSON number")
        v.number_value = obj
    elif isinstance(obj, str):
        v.string_value = obj
    elif isinstance(obj, Mapping):
        fields = v.struct_value.fields
        v.struct_value.SetInParent()
        for k, item in obj.items():
            if not isinstance(k, str):
                raise TypeError(f"JSON object keys must be str, not {type(k).__name__}")
            to_value(item, fields[k])
    elif isinstance(obj, (list, tuple)):
        values = v.list_value.values
        v.list_value.SetInParent()
        for item in obj:
            to_value(item, values.add())
    else:
        raise TypeError(f"{type(obj).__name__} is not JSON-like (None, bool, int, float, str, dict, list)")
    return v


def from_value(v: struct_pb2.Value) -> Any:
    """Return a google.protobuf.Value as Python data (see the module doc on numbers)."""
    kind = v.WhichOneof("kind")
    if kind == "number_value":
        n = v.number_value
        if n.is_integer() and abs(n) <= MAX_EXACT_INT:
            return int(n)
        return n
    if kind == "string_value":
        return v.string_value
    if kind == "bool_value":
        return v.bool_value
    if kind == "struct_value":
        fields = v.struct_value.fields
        return {k: from_value(fields[k]) for k in sorted(fields)}
    if kind == "list_value":
        return [from_value(item) for item in v.list_value.values]
    return None  # null_value, or an unset Value


def from_raw_or_value(raw: bytes, v: struct_pb2.Value) -> Any:
    """Return the raw JSON text (the gateway's raw_* fields) parsed, when it
    was sent instead of the Value, else the Value as Python data."""
    if raw:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("utf-8", "replace")
        try:
            return json.loads(text)
        except RecursionError:
            # A result nested deeper than the gateway's bound arrives as
            # raw JSON; past about 1000 levels json.loads runs out of
            # Python's recursion limit, so decode it without recursion.
            return _loads_deep(text)
    return from_value(v)


_WS = " \t\n\r"


class _Obj:
    """An object being decoded by _loads_deep, and the key of its next value."""

    __slots__ = ("d", "key")

    def __init__(self, key: str) -> None:
        self.d: dict = {}
        self.key = key


def _loads_deep(text: str) -> Any:
    """json.loads for JSON nested too deeply for it: containers on an
    explicit stack, scalars and keys decoded by :mod:`json` itself (which
    does not recurse for them). Raises json.JSONDecodeError on bad JSON."""
    dec = json.JSONDecoder()
    n = len(text)
    stack: list = []  # open containers: list, or _Obj

    def skip(i: int) -> int:
        while i < n and text[i] in _WS:
            i += 1
        return i

    def key(i: int) -> tuple:
        i = skip(i)
        if i >= n or text[i] != '"':
            raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, i)
        k, i = dec.raw_decode(text, i)
        i = skip(i)
        if i >= n or text[i] != ":":
            raise json.JSONDecodeError("Expecting ':' delimiter", text, i)
        return k, skip(i + 1)

    i = skip(0)
    while True:
        # A value starts at i.
        if i >= n:
            raise json.JSONDecodeError("Expecting value", text, i)
        if text[i] == "[":
            i = skip(i + 1)
            if i >= n or text[i] != "]":
                stack.append([])
                continue
            value: Any = []
            i += 1
        elif text[i] == "{":
            i = skip(i + 1)
            if i >= n or text[i] != "}":
                k, i = key(i)
                stack.append(_Obj(k))
                continue
            value = {}
            i += 1
        else:
            value, i = dec.raw_decode(text, i)
        # Put it in its container, closing every container it completes.
        while True:
            if not stack:
                i = skip(i)
                if i != n:
                    raise json.JSONDecodeError("Extra data", text, i)
                return value
            top = stack[-1]
            if isinstance(top, _Obj):
                top.d[top.key] = value
            else:
                top.append(value)
            i = skip(i)
            if i < n and text[i] == ",":
                i = skip(i + 1)
                if isinstance(top, _Obj):
                    top.key, i = key(i)
                break
            closer = "}" if isinstance(top, _Obj) else "]"
            if i >= n or text[i] != closer:
                raise json.JSONDecodeError("Expecting ',' delimiter", text, i)
            i += 1
            stack.pop()
            value = top.d if isinstance(top, _Obj) else top

