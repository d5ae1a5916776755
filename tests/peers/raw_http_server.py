#!/usr/bin/env python3
"""A raw MCP 2026-07-28 Streamable HTTP server (standard library only) for the probe's own
tests of intermediaries and network faults.

    raw_http_server.py PORT [--no-accel-header] [--head-delay-ms N] [--hang-after N]
    (PORT 0: any free port)

POST /mcp with one JSON-RPC message. `tools/list` gets a JSON body. `tools/call` of
`slow_op {steps, step_ms}` gets a `text/event-stream` body: progress after each step (when the
request carried a progress token), then the result; the connection then closes. A client that
goes away stops the call (closing the stream is the cancellation, spec §5.2).

--no-accel-header    leave out `X-Accel-Buffering: no`, so an nginx-like proxy buffers
--head-delay-ms N    wait N ms before the response head of a call (a silent start)
--hang-after N       once the N-th tools/call has begun, answer nothing more at all (a wedged
                     server: calls stop mid-way, every later request is held unanswered)
"""

import http.server
import json
import sys
import threading
import time

PORT = int(sys.argv[1])
ACCEL = "--no-accel-header" not in sys.argv
HEAD_DELAY = 0.0
if "--head-delay-ms" in sys.argv:
    HEAD_DELAY = int(sys.argv[sys.argv.index("--head-delay-ms") + 1]) / 1000
HANG_AFTER = None
if "--hang-after" in sys.argv:
    HANG_AFTER = int(sys.argv[sys.argv.index("--hang-after") + 1])
calls_begun = 0
count_lock = threading.Lock()
wedged = threading.Event()


def hold_forever():
    while True:
        time.sleep(3600)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def json_body(self, status, msg):
        body = json.dumps(msg).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def event(self, msg):
        self.wfile.write(b"event: message\ndata: " + json.dumps(msg).encode() + b"\n\n")
        self.wfile.flush()

    def foreign(self):
        """The Host or Origin that names no loopback host, if any (DNS-rebinding protection)."""
        for name in ("Host", "Origin"):
            value = self.headers.get(name)
            if value is None:
                continue
            host = value.split("://", 1)[-1] if name == "Origin" else value
            host = host.rsplit(":", 1)[0] if not host.endswith("]") else host
            if host.strip("[]") not in ("localhost", "127.0.0.1", "::1"):
                return name, value
        return None

    def do_POST(self):
        global calls_begun
        msg = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        bad = self.foreign()
        if bad is not None:
            return self.json_body(403, {"jsonrpc": "2.0", "id": rid, "error": {
                "code": -32600, "message": f"Forbidden: {bad[0]} {bad[1]!r}"}})
        if wedged.is_set():
            hold_forever()
        if HANG_AFTER is not None and method == "tools/call":
            with count_lock:
                calls_begun += 1
                if calls_begun >= HANG_AFTER:
                    wedged.set()
        if rid is None:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if method == "server/discover":
            # 2026-07-28 servers MUST implement it (a client in auto mode asks first).
            return self.json_body(200, {"jsonrpc": "2.0", "id": rid, "result": {
                "resultType": "complete", "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "private",
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "raw", "version": "1"}}}})
        if method == "tools/list":
            return self.json_body(200, {"jsonrpc": "2.0", "id": rid, "result": {
                "resultType": "complete", "tools": [{"name": "slow_op",
                                                     "inputSchema": {"type": "object"}}]}})
        if method != "tools/call" or params.get("name") != "slow_op":
            return self.json_body(200, {"jsonrpc": "2.0", "id": rid, "error": {
                "code": -32601, "message": f"unknown {method}"}})
        args = params.get("arguments") or {}
        steps, step_ms = int(args.get("steps", 3)), int(args.get("step_ms", 100))
        token = (params.get("_meta") or {}).get("progressToken")
        time.sleep(HEAD_DELAY)
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            if ACCEL:
                self.send_header("X-Accel-Buffering", "no")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.flush()
            for done in range(1, steps + 1):
                time.sleep(step_ms / 1000)
                if wedged.is_set():
                    hold_forever()
                if token is not None:
                    self.event({"jsonrpc": "2.0", "method": "notifications/progress",
                                "params": {"progressToken": token, "progress": done,
                                           "total": steps}})
            self.event({"jsonrpc": "2.0", "id": rid, "result": {
                "resultType": "complete", "content": [{"type": "text", "text": "done"}]}})
        except (BrokenPipeError, ConnectionResetError):
            return  # the client closed the stream: the call is cancelled


# PORT 0 binds a free port; the port bound is the first line on stdout either way, written once
# the socket listens, so a caller never races another process for a port it picked.
server = http.server.ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
