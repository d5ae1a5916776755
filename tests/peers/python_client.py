"""A client built with the Python SDK (PyPI `mcp` 2.3.0), driven against `mcp-sim serve`.

Usage:
    python_client.py PLAN (--url URL | -- COMMAND ARGS...)

PLAN is a JSON list of calls made one after the other, each
`{"steps": N, "step_ms": M, "timeout_ms": T, "progress": true}`: a `tools/call` of `slow_op`
with `read_timeout_seconds` T/1000 (absent: none), and a progress callback when `progress` is
true (the SDK then puts a progressToken on the request). One JSON line per call goes to stdout:
`{"call": i, "outcome": "result" | "error" | "timeout", "progress": n, "ms": elapsed}`.

Run with the venv the tests install: `target/peers/python-mcp-2.3.0/bin/python`.
"""

import json
import sys
import time

import anyio

from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError


async def main() -> None:
    plan = json.loads(sys.argv[1])
    rest = sys.argv[2:]
    if rest[:1] == ["--url"]:
        server = rest[1]
    else:
        command = rest[1:] if rest[:1] == ["--"] else rest
        server = StdioServerParameters(command=command[0], args=command[1:])
    async with Client(server) as client:
        for i, call in enumerate(plan):
            seen = []

            async def on_progress(progress, total, message, seen=seen):
                seen.append(progress)

            timeout = call.get("timeout_ms")
            started = time.monotonic()
            try:
                result = await client.call_tool(
                    "slow_op",
                    {"steps": call["steps"], "step_ms": call["step_ms"]},
                    read_timeout_seconds=None if timeout is None else timeout / 1000,
                    progress_callback=on_progress if call.get("progress", True) else None,
                )
                outcome = "error" if result.is_error else "result"
            except MCPError as e:
                text = str(e).lower()
                outcome = "timeout" if "timed out" in text or "timeout" in text else "error"
            except TimeoutError:
                outcome = "timeout"
            elapsed = int((time.monotonic() - started) * 1000)
            print(json.dumps({"call": i, "outcome": outcome, "progress": len(seen), "ms": elapsed}), flush=True)


if __name__ == "__main__":
    anyio.run(main)
