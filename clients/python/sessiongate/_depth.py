"""The nesting bound of job inputs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, List, Tuple

import grpc

from .errors import InvalidArgumentError

#: How deeply a job's input may nest lists and dicts: the gateway's bound
#: (32), the deepest JSON every client can decode as a google.protobuf.Value.
#: Results deeper than this arrive as raw JSON and decode as any other.
MAX_INPUT_DEPTH = 32


def check_input_depth(obj: Any) -> None:
    """Raise :class:`~sessiongate.InvalidArgumentError` (reason
    ``VALUE_TOO_DEEP``, the path in ``metadata["field"]``, as the gateway
    would) when obj nests lists and dicts deeper than MAX_INPUT_DEPTH. It
    walks without recursion, so any depth is refused cleanly, before the
    input is converted or sent."""
    stack: List[Tuple[Any, int, str]] = [(obj, 0, "")]
    while stack:
        o, depth, path = stack.pop()
        if isinstance(o, Mapping):
            children = [(v, f"{path}.{k}") for k, v in o.items()]
        elif isinstance(o, (list, tuple)):
            children = [(v, f"{path}[{i}]") for i, v in enumerate(o)]
        else:
            continue
        if depth == MAX_INPUT_DEPTH:
            field = "input" + path
            raise InvalidArgumentError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"{field}: nested deeper than {MAX_INPUT_DEPTH} lists and dicts, the deepest every client can decode",
                reason="VALUE_TOO_DEEP",
                domain="sessiongate",
                metadata={"field": field, "max_depth": str(MAX_INPUT_DEPTH)},
            )
        stack.extend((v, depth + 1, p) for v, p in reversed(children))
