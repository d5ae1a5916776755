"""A Streamable HTTP MCP server built with the Python SDK (PyPI `mcp` 2.3.0), for `mcp-sim probe --url`.

The same tool as `python_slow_server.py`: `slow_op(steps, step_ms)` sleeps `step_ms`
milliseconds per step and reports progress `1..steps` of `steps` through the SDK's progress
API (`Context.report_progress`). The server is stateless (no session id) and answers each POST
with an SSE stream (progress notifications, then the result). It is served by uvicorn (a
dependency of `mcp`) through `MCPServer.run("streamable-http", ...)`, at
`http://127.0.0.1:PORT/mcp`.

Run: `target/peers/python-mcp-2.3.0/bin/python tests/peers/python_slow_http_server.py PORT`, the
venv that the tests install (tests/peers/python-requirements.txt pins `mcp==2.3.0`).
"""

import sys

import anyio

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("python-slow-http-server", log_level="WARNING")


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
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8000
    server.run("streamable-http", host="127.0.0.1", port=port, stateless_http=True)
