"""A stdio MCP server built with the Python SDK 1.x (PyPI `mcp` 1.30.0, legacy era only), for
`mcp-sim probe`.

One tool, `slow_op(steps, step_ms)`: it sleeps `step_ms` milliseconds per step and reports
progress `1..steps` of `steps` through the SDK's progress API (`Context.report_progress`, sent
only when the request carries a progressToken). A `notifications/cancelled` cancels the
handler's task inside the SDK (`RequestResponder.cancel`), which then answers the cancelled
request with `{"code": 0, "message": "Request cancelled"}` (python-sdk #2480).

Run: `target/peers/python-mcp-1.30.0/bin/python tests/peers/python1/slow_server.py` (the venv
the tests install from tests/peers/python1-requirements.txt); with `http PORT` it serves
Streamable HTTP (stateful: sessions, GET streams) at `http://127.0.0.1:PORT/mcp` instead.
"""

import sys

import anyio

from mcp.server.fastmcp import Context, FastMCP

server = FastMCP("python1-slow-server")


@server.tool()
async def slow_op(ctx: Context, steps: int = 5, step_ms: int = 200) -> str:
    """Sleep `step_ms` ms per step for `steps` steps, reporting progress after each."""
    steps = max(0, min(int(steps), 1000))
    step_ms = max(0, min(int(step_ms), 60_000))
    for i in range(1, steps + 1):
        await anyio.sleep(step_ms / 1000)
        await ctx.report_progress(i, steps, f"step {i} of {steps}")
    return f"done {steps} steps"


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.settings.port = int(sys.argv[2]) if len(sys.argv) > 2 else 8000
        server.settings.log_level = "WARNING"
        server.run("streamable-http")
    else:
        server.run("stdio")
