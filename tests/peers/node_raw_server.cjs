// A raw MCP stdio server in plain Node.js (CommonJS, no SDK), legacy era (2025-11-25), for
// mcp-sim's virtual-peer tests: the Node.js shim must run CommonJS as it runs ES modules,
// hold `Date`, `Math.random`, `crypto.randomUUID` and `performance.now` to the seed, and name
// what it cannot hold.
//
//     node node_raw_server.cjs [MODE]
//
// Tool `slow_op {steps, step_ms}`: waits `step_ms` per step with setTimeout, sends progress
// after each step when the request carried a progress token, then the result, which quotes
// the virtual clock and a random draw (the same in every run of a seed). A cancel stops the
// call (nothing more is sent for it). MODE, after the steps of a call:
//
//     clean       nothing more (the default)
//     subprocess  runs `true` in a child process
//     socket      connects a TCP socket to 127.0.0.1:9 (trying is the escape)
//     worker      starts a worker thread
//     pid         puts its process id in the result: no escape, but every run differs,
//                 which only running a seed twice (`--verify`) shows
"use strict";

const crypto = require("node:crypto");
const mode = process.argv[2] || "clean";
const calls = new Map(); // request id (JSON text) -> timer of its next step
const started = Date.now();

function send(msg) {
  process.stdout.write(JSON.stringify(msg) + "\n");
}

function escapeNow() {
  if (mode === "subprocess") require("node:child_process").spawnSync("true");
  if (mode === "socket") require("node:net").connect(9, "127.0.0.1").on("error", () => {});
  if (mode === "worker") new (require("node:worker_threads").Worker)("0", { eval: true });
}

function slowOp(id, params) {
  const key = JSON.stringify(id);
  const { steps = 5, step_ms = 200 } = params.arguments || {};
  const token = params._meta && params._meta.progressToken;
  let done = 0;
  const step = () => {
    if (!calls.has(key)) return;
    if (done === steps) {
      calls.delete(key);
      escapeNow();
      const who = mode === "pid" ? ` pid ${process.pid}` : "";
      const text = `done ${done} of ${steps} steps at ${Date.now() - started} ms, draw ${Math.random().toFixed(6)}, ${crypto.randomUUID()}, ${Math.round(performance.now())}${who}`;
      send({ jsonrpc: "2.0", id, result: { content: [{ type: "text", text }] } });
      return;
    }
    calls.set(key, setTimeout(() => {
      done++;
      if (token !== undefined && calls.has(key)) {
        send({ jsonrpc: "2.0", method: "notifications/progress", params: { progressToken: token, progress: done, total: steps } });
      }
      step();
    }, step_ms));
  };
  calls.set(key, null);
  step();
}

function handle(msg) {
  const { id, method, params = {} } = msg;
  if (method === "initialize") {
    send({ jsonrpc: "2.0", id, result: { protocolVersion: "2025-11-25", capabilities: { tools: {} }, serverInfo: { name: "node-raw", version: "1.0.0" } } });
  } else if (method === "ping") {
    send({ jsonrpc: "2.0", id, result: {} });
  } else if (method === "tools/list") {
    send({ jsonrpc: "2.0", id, result: { tools: [{ name: "slow_op", inputSchema: { type: "object" } }] } });
  } else if (method === "tools/call") {
    slowOp(id, params);
  } else if (method === "notifications/cancelled") {
    const key = JSON.stringify(params.requestId);
    clearTimeout(calls.get(key));
    calls.delete(key);
  } else if (id !== undefined) {
    send({ jsonrpc: "2.0", id, error: { code: -32601, message: "Method not found" } });
  }
}

let buffer = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  buffer += chunk;
  let nl;
  while ((nl = buffer.indexOf("\n")) >= 0) {
    const line = buffer.slice(0, nl).trim();
    buffer = buffer.slice(nl + 1);
    if (line) handle(JSON.parse(line));
  }
});
process.stdin.on("end", () => process.exit(0));
