"""A Python SDK 2.3.0 stdio server whose tools sleep with `time.sleep`, for the virtual peer.

- `slow_op(steps, step_ms)` is synchronous: the SDK runs it in a worker thread
  (`anyio.to_thread.run_sync`), where each `time.sleep` is a wait on the virtual clock while
  the other calls go on. It reports no progress (a sync tool has no awaitable context).
- `blocking_op(steps, step_ms)` is asynchronous but sleeps with `time.sleep`, blocking its
  event loop as it would live: nothing else runs meanwhile, and what it writes afterwards is
  that much later.

Run: `mcp-sim sweep --virtual -- target/peers/python-mcp-2.3.0/bin/python
tests/peers/python_sync_tool_server.py` (the venv the tests install).
"""

import time

from mcp.server.mcpserver import MCPServer

server = MCPServer("python-sync-tool-server")


@server.tool()
def slow_op(steps: int = 5, step_ms: int = 200) -> str:
    """Sleep `step_ms` ms per step for `steps` steps, in a worker thread."""
    checksum = 0
    for i in range(max(0, min(int(steps), 1000))):
        time.sleep(max(0, min(int(step_ms), 60_000)) / 1000)
        checksum = (checksum * 31 + sum(range(1000)) + i) % 1_000_003
    return f"done {steps} steps ({checksum})"


@server.tool()
async def blocking_op(steps: int = 5, step_ms: int = 200) -> str:
    """Block the event loop `step_ms` ms per step for `steps` steps."""
    for _ in range(max(0, min(int(steps), 1000))):
        time.sleep(max(0, min(int(step_ms), 60_000)) / 1000)
    return f"done {steps} steps"


if __name__ == "__main__":
    server.run("stdio")
