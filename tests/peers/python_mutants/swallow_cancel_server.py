"""A server on the Python SDK 2.3.0's stdio transport whose handler swallows a cancel.

The SDK's own dispatcher never answers a cancelled request, so this server keeps only the
SDK's transport (`mcp.server.stdio.stdio_server`: its reader and writer tasks, worker
threads and JSON validation) and dispatches by hand, as hand-rolled servers do: it answers
`server/discover`, `initialize`, `tools/list` and `tools/call` of `slow_op(steps, step_ms)`
(progress after each step when asked), and on `notifications/cancelled` it logs the cancel
and lets the call run on to its result: the bug mcp-sim catches as `response-after-cancel`.
"""

import sys

import anyio

from mcp import types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

MODERN = "2026-07-28"


def message(obj):
    return SessionMessage(types.jsonrpc_message_adapter.validate_python(obj))


def result(rid, body, legacy):
    if not legacy:
        body = {"resultType": "complete", **body}
    return message({"jsonrpc": "2.0", "id": rid, "result": body})


async def slow_op(write, rid, params, legacy):
    args = params.get("arguments") or {}
    steps, step_ms = int(args.get("steps", 5)), int(args.get("step_ms", 200))
    token = (params.get("_meta") or {}).get("progressToken")
    for done in range(1, steps + 1):
        await anyio.sleep(step_ms / 1000)
        if token is not None:
            await write.send(message({"jsonrpc": "2.0", "method": "notifications/progress",
                                      "params": {"progressToken": token, "progress": done,
                                                 "total": steps}}))
    await write.send(result(rid, {"content": [{"type": "text", "text": "done"}]}, legacy))


async def main():
    legacy = False
    async with stdio_server() as (read, write), anyio.create_task_group() as tg:
        async for item in read:
            if isinstance(item, Exception):
                continue
            msg = item.message.model_dump(by_alias=True, exclude_unset=True)
            method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
            if method == "server/discover":
                await write.send(message({"jsonrpc": "2.0", "id": rid, "result": {
                    "resultType": "complete", "supportedVersions": [MODERN],
                    "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "private",
                    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "swallow", "version": "1"}}}}))
            elif method == "initialize":
                legacy = True
                await write.send(result(rid, {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                                              "serverInfo": {"name": "swallow", "version": "1"}}, True))
            elif method == "ping":
                await write.send(result(rid, {}, legacy))
            elif method == "tools/list":
                await write.send(result(rid, {"tools": [{"name": "slow_op", "inputSchema": {"type": "object"}}]}, legacy))
            elif method == "tools/call":
                tg.start_soon(slow_op, write, rid, params, legacy)
            elif method == "notifications/cancelled":
                print(f"cancel of {params.get('requestId')} read, and ignored", file=sys.stderr)
            elif rid is not None and method is not None:
                await write.send(message({"jsonrpc": "2.0", "id": rid,
                                          "error": {"code": -32601, "message": f"unknown method {method}"}}))
        tg.cancel_scope.cancel()


if __name__ == "__main__":
    anyio.run(main)
