"""The server of `python_slow_server.py` written as `mcp run` and `mcp dev` take one: the server
object only, no `__main__` block (mcp-sim's virtual peer starts it as `mcp run` does).

One tool, `slow_op(steps, step_ms)`: it sleeps `step_ms` milliseconds per step and reports
progress `1..steps` of `steps` through the SDK's progress API (`Context.report_progress`,
which sends `notifications/progress` only when the request carries a progressToken). A
`notifications/cancelled` for the call cancels the handler's task inside the SDK, so the
sleep is interrupted and the loop stops.

Run: `mcp-sim sweep --virtual -- target/peers/python-mcp-2.3.0/bin/python
tests/peers/python_mcp_run_server.py` (the venv the tests install).
"""

import anyio

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("python-slow-server")


@server.tool()
async def slow_op(ctx: Context, steps: int = 5, step_ms: int = 200) -> str:
    """Sleep `step_ms` ms per step for `steps` steps, reporting progress after each."""
    steps = max(0, min(int(steps), 1000))
    step_ms = max(0, min(int(step_ms), 60_000))
    for i in range(1, steps + 1):
        await anyio.sleep(step_ms / 1000)
        await ctx.report_progress(i, steps, f"step {i} of {steps}")
    return f"done {steps} steps"

