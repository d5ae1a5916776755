#!/usr/bin/env python3
"""A raw stdio-front MCP bridge (standard library only) with switchable faults, for
`mcp-sim check-proxy`'s own tests: each mode is one behaviour of the bridges people run.

    raw_bridge.py MODE [--url URL | --port PORT] -- SERVER COMMAND...

The front is this process's stdio (the reference client), or with `--port` a legacy-era
(2025-11-25) Streamable HTTP endpoint at http://127.0.0.1:PORT/mcp. The upstream is SERVER
COMMAND on stdio (one process, or one per request), or with `--url` a Streamable HTTP endpoint
spoken in 2026-07-28. Request ids are passed on as they are, each child numbering its own.

MODE:
    relay             one child, everything passed on both ways (the baseline)
    side-session      relay, and a second child opened with `initialize` at start and
                      never used again (an unused side session in the legacy era)
    child-per-request a child per front request; a cancel goes to the child doing the work
    misaddressed      a child per front request; a cancel goes to the newest child instead
    early-cancel      relay, and each call is cancelled upstream 300 ms after it was passed
                      on, before the client cancels it (the front keeps waiting)
    http-close        `--url`: a front cancel closes the call's upstream stream (correct)
    http-post-cancel  `--url`: a front cancel is POSTed as notifications/cancelled and the
                      call's stream is left open (the upstream rightly works on)
    front-relay       `--port`: each call's messages on its own POST's event stream
    front-wrong-stream `--port`: a call's progress on the stream of another call still open
"""

import json
import subprocess
import sys
import threading
import urllib.parse
import http.client

MODE = sys.argv[1]
rest = sys.argv[2:]
URL = None
PORT = None
if rest[:1] == ["--url"]:
    URL, rest = rest[1], rest[2:]
if rest[:1] == ["--port"]:
    PORT, rest = int(rest[1]), rest[2:]
if rest[:1] == ["--"]:
    rest = rest[1:]
SERVER = rest
out_lock = threading.Lock()
table_lock = threading.Lock()


def to_front(line):
    with out_lock:
        sys.stdout.write(line if line.endswith("\n") else line + "\n")
        sys.stdout.flush()


class Child:
    """One upstream process: lines written to its stdin, its stdout passed to the front."""

    def __init__(self, to_front=True, reader=None):
        self.proc = subprocess.Popen(
            SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )
        self.lock = threading.Lock()
        if reader is None:
            reader = self.pump if to_front else self.drain
        threading.Thread(target=reader, args=(self.proc.stdout,), daemon=True).start()

    def send(self, msg):
        with self.lock:
            try:
                self.proc.stdin.write(json.dumps(msg) + "\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, ValueError):
                pass

    @staticmethod
    def pump(lines):
        for line in lines:
            if line.strip():
                to_front(line)

    @staticmethod
    def drain(lines):
        for _ in lines:
            pass

    def close(self):
        try:
            self.proc.stdin.close()
        except (BrokenPipeError, ValueError):
            pass


def key(rid):
    return json.dumps(rid)


def front_messages():
    """The JSON messages the client writes, one per line (anything else skipped)."""
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except ValueError:
            continue


def stdio_modes():
    per_request = MODE in ("child-per-request", "misaddressed")
    main = None if per_request else Child()
    children = {}  # request id -> its child (a child per request)
    newest = [None]
    if MODE == "side-session":
        side = Child(to_front=False)
        side.send(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "raw-bridge-side", "version": "1.0"},
                },
            }
        )
    for msg in front_messages():
        method = msg.get("method")
        if not per_request:
            main.send(msg)
            if MODE == "early-cancel" and method == "tools/call" and "id" in msg:
                cancel = {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": msg["id"], "reason": "bridge gave up"},
                }
                threading.Timer(0.3, main.send, args=(cancel,)).start()
            continue
        if "id" in msg and method is not None:
            child = Child()
            with table_lock:
                children[key(msg["id"])] = child
                newest[0] = child
            child.send(msg)
        elif method == "notifications/cancelled":
            rid = (msg.get("params") or {}).get("requestId")
            with table_lock:
                target = newest[0] if MODE == "misaddressed" else children.get(key(rid))
            if target is not None:
                target.send(msg)
    for child in [main, *children.values()]:
        if child is not None:
            child.close()


def http_modes():
    url = urllib.parse.urlsplit(URL)
    streams = {}  # request id -> its open HTTP connection

    def headers(msg):
        h = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2026-07-28",
        }
        if "method" in msg:
            h["mcp-method"] = msg["method"]
            name = (msg.get("params") or {}).get("name")
            if msg["method"] == "tools/call" and name:
                h["mcp-name"] = name
        return h

    def post(msg):
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=600)
        conn.request("POST", url.path, body=json.dumps(msg), headers=headers(msg))
        return conn, conn.getresponse()

    def call(msg):
        try:
            conn, resp = post(msg)
        except OSError:
            return
        with table_lock:
            streams[key(msg["id"])] = conn
        try:
            if resp.getheader("content-type", "").startswith("text/event-stream"):
                for raw in resp:
                    line = raw.decode("utf-8", "replace").rstrip("\r\n")
                    if line.startswith("data:"):
                        to_front(line[5:].strip())
            else:
                body = resp.read().decode("utf-8", "replace").strip()
                if body:
                    to_front(body)
        except (OSError, ValueError, http.client.HTTPException):
            pass
        finally:
            with table_lock:
                streams.pop(key(msg["id"]), None)
            conn.close()

    for msg in front_messages():
        if "id" in msg and "method" in msg:
            threading.Thread(target=call, args=(msg,), daemon=True).start()
        elif msg.get("method") == "notifications/cancelled":
            rid = (msg.get("params") or {}).get("requestId")
            if MODE == "http-post-cancel":
                try:
                    conn, resp = post(msg)
                    resp.read()
                    conn.close()
                except OSError:
                    pass
            else:
                with table_lock:
                    conn = streams.pop(key(rid), None)
                if conn is not None and conn.sock is not None:
                    import socket

                    try:
                        conn.sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    conn.close()


def front_modes():
    """A legacy-era Streamable HTTP front before one stdio child: a POSTed request gets an
    event stream (a priming event, then what the child sends for it, then its answer); a
    POSTed notification or response 202; GET 405."""
    import queue
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    streams = {}  # request id (JSON text) -> queue of the messages for its stream
    tokens = {}  # progress token (JSON text) -> request id (JSON text)
    event_ids = [0]

    def deliver(rid, msg):
        with table_lock:
            target = streams.get(rid)
            if MODE == "front-wrong-stream" and "method" in msg:
                others = [q for k, q in streams.items() if k != rid]
                if others:
                    target = others[-1]
        if target is not None:
            target.put(msg)

    def pump(lines):
        for line in lines:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if "id" in msg and ("result" in msg or "error" in msg):
                deliver(key(msg["id"]), msg)
            elif msg.get("method") == "notifications/progress":
                token = key((msg.get("params") or {}).get("progressToken"))
                with table_lock:
                    rid = tokens.get(token)
                if rid is not None:
                    deliver(rid, msg)

    child = Child(reader=pump)

    class Front(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(405)
            self.send_header("content-length", "0")
            self.end_headers()

        do_DELETE = do_GET

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            try:
                msg = json.loads(body)
            except ValueError:
                self.send_response(400)
                self.send_header("content-length", "0")
                self.end_headers()
                return
            if not ("id" in msg and "method" in msg):
                if msg.get("method") == "notifications/cancelled":
                    rid = key((msg.get("params") or {}).get("requestId"))
                    with table_lock:
                        q = streams.pop(rid, None)
                    if q is not None:
                        q.put(None)
                child.send(msg)
                self.send_response(202)
                self.send_header("content-length", "0")
                self.end_headers()
                return
            rid = key(msg["id"])
            q = queue.Queue()
            token = ((msg.get("params") or {}).get("_meta") or {}).get("progressToken")
            with table_lock:
                streams[rid] = q
                if token is not None:
                    tokens[key(token)] = rid
            child.send(msg)
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            if msg["method"] == "initialize":
                self.send_header("mcp-session-id", "raw-bridge-1")
            self.end_headers()

            def event(data):
                with table_lock:
                    event_ids[0] += 1
                    n = event_ids[0]
                self.wfile.write(f"id: {n}\ndata: {data}\n\n".encode())
                self.wfile.flush()

            try:
                event("")
                while True:
                    out = q.get()
                    if out is None:
                        break
                    event(json.dumps(out))
                    if out.get("id") == msg["id"] and "method" not in out:
                        break
            except OSError:
                pass
            with table_lock:
                if streams.get(rid) is q:
                    del streams[rid]

    ThreadingHTTPServer(("127.0.0.1", PORT), Front).serve_forever()


if __name__ == "__main__":
    if MODE.startswith("front-"):
        front_modes()
    elif MODE.startswith("http-"):
        http_modes()
    else:
        stdio_modes()
