"""Message size limits of the Python client."""

from __future__ import annotations

from typing import Any, List, Sequence, Tuple

#: The largest message the client accepts: 32 MiB, the gateway's own send
#: limit, above the largest result a runtime can send it (the gateway's
#: --max-frame-bytes, 16 MiB by default). gRPC's default of 4 MiB would lose
#: results the job already produced.
MAX_RECEIVE_BYTES = 32 << 20


def with_receive_limit(options: Sequence[Tuple[str, Any]]) -> List[Tuple[str, Any]]:
    """The channel options with MAX_RECEIVE_BYTES, unless the caller set a
    receive limit of their own."""
    opts = list(options)
    if not any(k == "grpc.max_receive_message_length" for k, _ in opts):
        opts.append(("grpc.max_receive_message_length", MAX_RECEIVE_BYTES))
    return opts
