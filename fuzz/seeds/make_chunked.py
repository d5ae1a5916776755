#!/usr/bin/env python3
"""Writes the seeds of the ndjson_chunks, sse_chunks, sse_differential and live_output targets.

Those targets take `mcp_sim::fuzzing::ChunkedInput` built by `arbitrary` 1.x from the fuzzer's
bytes, so a seed is the arbitrary encoding of a (data, cuts, max_line, lenient) value:
each Vec element is preceded by a 0x01 continue byte and the Vec ends with 0x00; integers
are little-endian. `cargo fuzz fmt <target> <file>` prints what a file decodes to.

`live_output` takes `mcp_sim::fuzzing::LiveOutput` (http, event_stream, data, cuts): two bool
bytes, the data as above, then the cuts as plain little-endian u16s (the last field takes the
rest of the input).

Run from the repository root: python3 fuzz/seeds/make_chunked.py
"""
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)))


def encode(data: bytes, cuts, max_line: int, lenient: int) -> bytes:
    out = bytearray()
    for b in data:
        out += bytes([1, b])
    out.append(0)
    for c in cuts:
        out.append(1)
        out += struct.pack("<H", c)
    out.append(0)
    out.append(max_line)
    out.append(lenient)
    return bytes(out)


CANCEL = b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}'
PROGRESS = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p-7","progress":1,"total":3}}'
PROGRESS2 = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p-7","progress":2,"total":3}}'
RESULT = b'{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","content":[]}}'
REQUEST = (
    b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow_op","_meta":'
    b'{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
    b'"io.modelcontextprotocol/clientCapabilities":{},"progressToken":"p-7"}}}'
)
TRUNCATED = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p-7","progress":1'

NDJSON = {
    # docs/spec/mcp-2026-07-28.md 10.5: one message per LF-terminated line
    "spec-stdio-session": (REQUEST + b"\n" + PROGRESS + b"\n" + PROGRESS2 + b"\n" + RESULT + b"\n", [1, 80, 233, 300], 255, 0),
    "cancel-line-split-at-lf": (CANCEL + b"\n" + CANCEL + b"\n", [len(CANCEL), len(CANCEL) + 1], 255, 0),
    # strictness switches: CR LF endings and blank lines, strict and lenient
    "crlf-blank-lines-strict": (CANCEL + b"\r\n\r\n" + RESULT + b"\r\n", [len(CANCEL) + 1], 255, 0),
    "crlf-blank-lines-lenient": (CANCEL + b"\r\n\r\n\n" + RESULT + b"\r\n", [len(CANCEL) + 1], 255, 3),
    # a banner line, two objects on one line, and a truncated last line with no LF
    "banner-two-objects-truncated": (b"Server started\n" + CANCEL + CANCEL + b"\n" + TRUNCATED, [7, 15, 200], 255, 0),
    # pretty-printed JSON spread over several lines
    "pretty-printed": (b'{\n  "jsonrpc": "2.0",\n  "method": "notifications/cancelled",\n  "params": {"requestId": 7}\n}\n', [3], 255, 0),
    # over-long line with a 33-byte limit, then a short one
    "line-too-long": (PROGRESS + b"\n" + b'{"a":1}\n', [10, 40], 32, 0),
}

SSE = {
    # docs/spec/mcp-2026-07-28.md 10.5: a keep-alive comment, two progress events, then the result
    "spec-http-response": (
        b": keep-alive\n\ndata: " + PROGRESS + b"\n\ndata: " + PROGRESS2 + b"\n\ndata: " + RESULT + b"\n\n",
        [5, 14, 20, 130],
        255,
        0,
    ),
    # BOM, CR-only endings, multi-line data, and the fields MCP does not use
    "bom-cr-multiline-fields": (
        b"\xef\xbb\xbfevent: message\rid: 42\rretry: 1000\rdata: {\"a\":\rdata:1}\r\r:ping\r",
        [1, 2, 3],
        255,
        0,
    ),
    # CR LF line ends with the chunk boundary between CR and LF
    "crlf-split": (b"data: " + CANCEL + b"\r\n\r\ndata\r\n\r\n", [len(CANCEL) + 7], 255, 0),
    # a line over the limit, an event over the limit, and a stream cut before its blank line
    "limits-and-truncation": (
        b"data: " + PROGRESS + b"\n\ndata: 0123456789\ndata: 0123456789\ndata: 0123456789\n\ndata: x\n",
        [50],
        15,
        0,
    ),
}


def write(target, seeds, encoder=encode):
    folder = os.path.join(ROOT, target)
    os.makedirs(folder, exist_ok=True)
    for name, fields in seeds.items():
        with open(os.path.join(folder, name + ".bin"), "wb") as f:
            f.write(encoder(*fields))


def encode_live(http: bool, event_stream: bool, data: bytes, cuts) -> bytes:
    out = bytearray([int(http), int(event_stream)])
    for b in data:
        out += bytes([1, b])
    out.append(0)
    for c in cuts:
        out += struct.pack("<H", c)
    return bytes(out)


# What a server writes back to the reference client's first call (id 1, progress token p-1).
P1 = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p-1","progress":1,"total":3}}'
P2 = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p-1","progress":2,"total":3}}'
R1 = b'{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","content":[]}}'
E1 = b'{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"boom"}}'
LIVE = {
    "stdio-progress-result": (False, False, P1 + b"\n" + P2 + b"\n" + R1 + b"\n", [3, 110, 200]),
    "stdio-banner-error-truncated": (False, False, b"listening\n" + E1 + b"\n" + P1[:40], [9, 10]),
    "stdio-crlf-blank": (False, False, P1 + b"\r\n\n" + R1 + b"\n", [len(P1) + 1]),
    "http-sse-keepalive-progress-result": (
        True, True, b": keep-alive\n\ndata: " + P1 + b"\n\ndata: " + R1 + b"\n\n", [4, 30, 140]),
    "http-sse-cut-inside-event": (True, True, b"data: " + P1 + b"\r\n\r\ndata: " + R1[:20], [7]),
    "http-json-result": (True, False, R1, [10]),
    "http-json-not-json": (True, False, b"<html>502 Bad Gateway</html>", []),
}


write("ndjson_chunks", NDJSON)
write("sse_chunks", SSE)
write("sse_differential", SSE)
write("live_output", LIVE, encode_live)
