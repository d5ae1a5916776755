"""A Python SDK 2.3.0 stdio server whose tool does what a virtual clock cannot hold.

`slow_op(steps, step_ms)` works as in `tests/peers/python_slow_server.py`, then, by MODE
(the first argument):

    subprocess  runs `true` in a subprocess
    socket      connects a TCP socket to 127.0.0.1:9 (the connection may fail: trying is
                the escape)
    thread      starts a thread of its own that sleeps on the wall clock
    pid         puts its process id in the result: no escape, but every run differs, which
                only running a seed twice (`--verify`) shows

`mcp-sim sweep --virtual` must report each as not-replayable, naming the escape (or the
first event where two runs differ), never as a finding or a pass.
"""

import os
import socket
import subprocess
import sys
import threading
import time

import anyio

from mcp.server.mcpserver import Context, MCPServer

MODE = sys.argv[1] if len(sys.argv) > 1 else "pid"
server = MCPServer("escaping-server")


def escape():
    if MODE == "subprocess":
        subprocess.run(["true"], check=False)
    elif MODE == "socket":
        s = socket.socket()
        s.settimeout(0.2)
        try:
            s.connect(("127.0.0.1", 9))
        except OSError:
            pass
        finally:
            s.close()
    elif MODE == "thread":
        threading.Thread(target=time.sleep, args=(0.01,), daemon=True).start()


@server.tool()
async def slow_op(ctx: Context, steps: int = 3, step_ms: int = 100) -> str:
    """Sleep and report progress, then escape the virtual clock by MODE."""
    for i in range(1, steps + 1):
        await anyio.sleep(step_ms / 1000)
        await ctx.report_progress(i, steps)
    escape()
    return f"done {steps} steps in process {os.getpid()}" if MODE == "pid" else "done"


if __name__ == "__main__":
    server.run("stdio")
