"""A Python SDK 2.3.0 server that sends progress from a background task after its result.

`slow_op(steps, step_ms)` reports progress as `tests/peers/python_slow_server.py` does, but
hands its last progress report to a background task and returns at once: the task sends
it through the session `step_ms` later, after the call's result (the SDK's own
`report_progress` would drop it then), which mcp-sim catches as `progress-after-completion`.
"""

import asyncio

import anyio

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("late-progress-server")
_background = set()


@server.tool()
async def slow_op(ctx: Context, steps: int = 5, step_ms: int = 200) -> str:
    """Sleep `step_ms` ms per step; the last progress goes out from a task, late."""
    for i in range(1, steps):
        await anyio.sleep(step_ms / 1000)
        await ctx.report_progress(i, steps, f"step {i} of {steps}")
    await anyio.sleep(step_ms / 1000)
    meta = ctx.request_context.meta or {}
    token = meta.get("progress_token", meta.get("progressToken"))
    session = ctx.session

    async def late():
        await asyncio.sleep(step_ms / 1000)
        if token is not None:
            await session.send_progress_notification(token, steps, steps, "the last step, late")

    task = asyncio.get_running_loop().create_task(late())
    _background.add(task)
    task.add_done_callback(_background.discard)
    return f"done {steps} steps"


if __name__ == "__main__":
    server.run("stdio")
