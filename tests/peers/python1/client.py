"""A client built with the Python SDK 1.x (PyPI `mcp` 1.30.0, legacy era only), driven against
`mcp-sim serve`.

Usage:
    client.py PLAN (--url URL | -- COMMAND ARGS...)

PLAN is a JSON list of calls made one after the other, each
`{"steps": N, "step_ms": M, "timeout_ms": T, "progress": true}`: a `tools/call` of `slow_op`
with `read_timeout_seconds` T/1000 (absent: none), and a progress callback when `progress` is
true (the SDK then puts a progressToken on the request). One JSON line per call goes to stdout:
`{"call": i, "outcome": "result" | "error" | "timeout", "progress": n, "ms": elapsed}`.

Run with the venv the tests install: `target/peers/python-mcp-1.30.0/bin/python`.
"""

import json
import sys
import time
from datetime import timedelta

import anyio

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared.exceptions import McpError


async def run(session: ClientSession, plan) -> None:
    await session.initialize()
    for i, call in enumerate(plan):
        seen = []

        async def on_progress(progress, total, message, seen=seen):
            seen.append(progress)

        timeout = call.get("timeout_ms")
        started = time.monotonic()
        try:
            result = await session.call_tool(
                "slow_op",
                {"steps": call["steps"], "step_ms": call["step_ms"]},
                read_timeout_seconds=None if timeout is None else timedelta(milliseconds=timeout),
                progress_callback=on_progress if call.get("progress", True) else None,
            )
            outcome = "error" if result.isError else "result"
        except McpError as e:
            text = str(e).lower()
            outcome = "timeout" if "timed out" in text or "timeout" in text else "error"
        elapsed = int((time.monotonic() - started) * 1000)
        print(json.dumps({"call": i, "outcome": outcome, "progress": len(seen), "ms": elapsed}), flush=True)


async def main() -> None:
    plan = json.loads(sys.argv[1])
    rest = sys.argv[2:]
    if rest[:1] == ["--url"]:
        async with streamablehttp_client(rest[1]) as (read, write, _):
            async with ClientSession(read, write) as session:
                await run(session, plan)
    else:
        command = rest[1:] if rest[:1] == ["--"] else rest
        server = StdioServerParameters(command=command[0], args=command[1:])
        async with stdio_client(server) as (read, write):
            async with ClientSession(read, write) as session:
                await run(session, plan)


if __name__ == "__main__":
    anyio.run(main)
