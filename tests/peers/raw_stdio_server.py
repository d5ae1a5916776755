#!/usr/bin/env python3
"""A raw MCP 2026-07-28 stdio server (standard library only) with switchable behaviour on a
cancel, for the probe's own tests.

Tool `slow_op {steps, step_ms}`: sleeps `steps` times `step_ms`, sends progress after each step
when the request carried a progress token, then the result.

    raw_stdio_server.py [MODE] [legacy]

With `legacy` it speaks only the legacy era (2025-11-25), as the TypeScript SDK v1 does: it
answers `initialize` and `ping`, refuses `server/discover` with -32601, and its results carry
no `resultType`.

MODE, on `notifications/cancelled` for a running call:
    correct          stop the call, send nothing more for it (the default); a call that is
                     writing its result when the cancel is read finishes first
    answer-cancel    stop it and answer with an error "Request cancelled" (python-sdk #1419)
    ignore-cancel    keep working: progress and the result follow (mcp-go #755)
    hang-on-cancel   stop the call, and from then on answer nothing at all (a handler that
                     wedges the server's only reader on cancel)
    ignore-ping      handle cancels correctly, answer every request but never `ping`
                     (with `legacy`)
"""

import json
import sys
import threading

MODE = sys.argv[1] if len(sys.argv) > 1 else "correct"
LEGACY = len(sys.argv) > 2 and sys.argv[2] == "legacy"
out_lock = threading.Lock()
state_lock = threading.Lock()  # the calls table, and a call's last check before it writes
calls = {}  # request id (as JSON text) -> threading.Event set on cancel
wedged = False  # hang-on-cancel: a cancel was read


def send(msg):
    with out_lock:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()


def result(rid, body):
    if not LEGACY:
        body = {"resultType": "complete", **body}
    return {"jsonrpc": "2.0", "id": rid, "result": body}


def slow_op(rid, params, stop):
    args = params.get("arguments") or {}
    steps, step_ms = int(args.get("steps", 3)), int(args.get("step_ms", 100))
    token = (params.get("_meta") or {}).get("progressToken")
    for done in range(1, steps + 1):
        if stop.wait(step_ms / 1000):
            return
        # Checked and written under the lock the cancel takes: once the reader has handled
        # a cancel, nothing more for the call is written.
        with state_lock:
            if stop.is_set():
                return
            if token is not None:
                send({"jsonrpc": "2.0", "method": "notifications/progress",
                      "params": {"progressToken": token, "progress": done, "total": steps}})
    with state_lock:
        if stop.is_set():
            return
        calls.pop(json.dumps(rid), None)
        send(result(rid, {"content": [{"type": "text", "text": "done"}]}))


for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if wedged:
        continue
    method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if method == "tools/call" and rid is not None and params.get("name") != "slow_op":
        send({"jsonrpc": "2.0", "id": rid,
              "error": {"code": -32602, "message": f"unknown tool {params.get('name')}"}})
    elif method == "tools/call" and rid is not None:
        stop = threading.Event()
        calls[json.dumps(rid)] = stop
        threading.Thread(target=slow_op, args=(rid, params, stop), daemon=True).start()
    elif LEGACY and method == "initialize" and rid is not None:
        send(result(rid, {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                          "serverInfo": {"name": "raw-legacy", "version": "1"}}))
    elif LEGACY and method == "ping" and MODE == "ignore-ping":
        pass
    elif LEGACY and method == "ping" and rid is not None:
        send(result(rid, {}))
    elif not LEGACY and method == "server/discover" and rid is not None:
        # 2026-07-28 servers MUST implement it (a client in auto mode asks first).
        send({"jsonrpc": "2.0", "id": rid, "result": {
            "resultType": "complete", "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "private",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "raw", "version": "1"}}}})
    elif method == "tools/list" and rid is not None:
        send(result(rid, {"tools": [{"name": "slow_op", "inputSchema": {"type": "object"}}]}))
    elif method == "notifications/cancelled":
        target = params.get("requestId")
        with state_lock:
            stop = None if MODE == "ignore-cancel" else calls.pop(json.dumps(target), None)
            if stop is not None:
                stop.set()
                wedged = MODE == "hang-on-cancel"
                if MODE == "answer-cancel":
                    send({"jsonrpc": "2.0", "id": target,
                          "error": {"code": -32800, "message": "Request cancelled"}})
    elif rid is not None:
        send({"jsonrpc": "2.0", "id": rid,
              "error": {"code": -32601, "message": f"unknown method {method}"}})
