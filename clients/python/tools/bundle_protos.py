"""Writes the copy of the protos that the Python package bundles.

Usage: bundle_protos.py OUT_DIR PROTO_ROOT...

Every .proto under each PROTO_ROOT is written to OUT_DIR/sessiongate/pb/<its
path>, with its package renamed from P to ``sessiongate.pb.P`` and its imports
(other than google/protobuf/*) moved likewise, well-known types named from
the root (``.google.protobuf.Struct``), and without the
timeoutprofile.v1 method options (the ``extend google.protobuf.MethodOptions``
block and every ``option (timeoutprofile.v1.profile)`` or ``(….streaming)``), which a client does not
use. So the bundled stubs register file names, message names and extension
numbers that no other copy of these protos uses, and protobuf's default
descriptor pool can hold them beside a user's own stubs of the same protos
(``sessiongate/v1/sessiongate.proto``, ``google/rpc/status.proto`` from
googleapis-common-protos, …). The wire format does not depend on these
names; clients/generate.sh puts the gRPC method paths back to
``/sessiongate.v1.SessionGateway/…``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PREFIX = "sessiongate.pb"


def _drop_block(text: str, start: re.Pattern) -> str:
    """Remove every statement matching start, up to its ';' or its
    balanced '{…}' (and a ';' right after it)."""
    out = []
    i = 0
    while True:
        m = start.search(text, i)
        if m is None:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i : m.start()])
        j = m.end()
        depth = 0
        while j < len(text):
            c = text[j]
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    j += 1
                    rest = re.match(r"\s*;", text[j:])
                    if rest:
                        j += rest.end()
                    break
            elif c == ";" and depth == 0:
                j += 1
                break
            j += 1
        i = j


def bundle(text: str) -> str:
    text = re.sub(r"^package\s+([\w.]+)\s*;", lambda m: f"package {PREFIX}.{m.group(1)};", text, flags=re.M)
    text = re.sub(
        r'^import\s+"(?!google/protobuf/)([^"]+)"\s*;',
        lambda m: f'import "{PREFIX.replace(".", "/")}/{m.group(1)}";',
        text,
        flags=re.M,
    )
    text = re.sub(r'^import\s+"google/protobuf/descriptor\.proto"\s*;\n', "", text, flags=re.M)
    text = _drop_block(text, re.compile(r"^\s*extend\s+google\.protobuf\.MethodOptions\s*", re.M))
    text = _drop_block(text, re.compile(r"^\s*option\s+\((?:timeoutprofile\.v1\.)?(?:profile|streaming)\)", re.M))
    # Under sessiongate.pb, "google.protobuf.X" would resolve inside our own
    # sessiongate.pb.google: name the well-known types from the root.
    text = re.sub(r"(?<![\w.])google\.protobuf\.(?=[A-Z])", ".google.protobuf.", text)
    return text


def main(argv: list) -> None:
    out = Path(argv[1]) / PREFIX.replace(".", "/")
    for root in map(Path, argv[2:]):
        for src in sorted(root.rglob("*.proto")):
            dst = out / src.relative_to(root)
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_text(bundle(src.read_text()))


if __name__ == "__main__":
    main(sys.argv)
