"""A raw asyncio MCP client (no SDK) for the virtual-client tests' edge cases.

Usage: python_raw_client.py MODE -- COMMAND ARGS...

It starts its server with `asyncio.create_subprocess_exec`, asks `server/discover`, then:
- `idle`: asks `tools/list` and closes the server's stdin: no tool is ever called, so a run
  exercises nothing;
- `escape`: runs a real `true` with `subprocess.run` (which no virtual clock can hold) and
  then calls `slow_op` to its end.
"""

import asyncio
import json
import subprocess
import sys

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw-client", "version": "1.0.0"},
}


async def request(proc, id_, method, params=None):
    msg = {"jsonrpc": "2.0", "id": id_, "method": method, "params": {"_meta": META, **(params or {})}}
    proc.stdin.write((json.dumps(msg) + "\n").encode())
    await proc.stdin.drain()
    while True:
        line = await proc.stdout.readline()
        if not line:
            raise SystemExit("the server went away")
        answer = json.loads(line)
        if answer.get("id") == id_:
            return answer


async def main() -> None:
    mode = sys.argv[1]
    command = sys.argv[3:] if sys.argv[2:3] == ["--"] else sys.argv[2:]
    proc = await asyncio.create_subprocess_exec(*command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    await request(proc, 1, "server/discover")
    if mode == "idle":
        await request(proc, 2, "tools/list")
    else:
        subprocess.run(["true"], check=False)
        await request(proc, 2, "tools/call", {"name": "slow_op", "arguments": {"steps": 2, "step_ms": 100}})
    proc.stdin.close()
    await proc.wait()
    print(json.dumps({"mode": mode, "exit": proc.returncode}))


if __name__ == "__main__":
    asyncio.run(main())
