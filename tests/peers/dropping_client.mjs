// A legacy-era stdio client that cannot bear an answer to a request it cancelled: on one, it
// drops its connection (closes the server's stdin and gives every open call up), as
// claude-code #51073 does. Otherwise it is the TS SDK v1 client's session of
// tests/recordings/python-sdk-1.30.0-stdio.jsonl: three slow_op calls, the second cancelled
// 1.5 s after it went out, the third sent with that cancel.
//
// Usage: node dropping_client.mjs -- COMMAND ARGS...
// Prints one JSON line per call: {"call": k, "outcome": "result" | "error" | "cancelled" |
// "dropped"}. No dependencies: the wire is written by hand.

import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

const sep = process.argv.indexOf('--');
if (sep < 0 || sep + 1 >= process.argv.length) {
  console.error('usage: node dropping_client.mjs -- COMMAND ARGS...');
  process.exit(2);
}
const [command, ...args] = process.argv.slice(sep + 1);
const server = spawn(command, args, { stdio: ['pipe', 'pipe', 'inherit'] });
const write = (msg) => server.stdin.write(JSON.stringify({ jsonrpc: '2.0', ...msg }) + '\n');

const calls = [
  { steps: 3, step_ms: 100 },
  { steps: 25, step_ms: 200 },
  { steps: 2, step_ms: 100 },
];
const outcomes = new Map(); // call index -> outcome
const cancelled = new Set(); // request ids cancelled
let dropped = false;
let initialized = false;

function report(k, outcome) {
  if (outcomes.has(k)) return;
  outcomes.set(k, outcome);
  console.log(JSON.stringify({ call: k - 1, outcome }));
}

function call(k) {
  write({
    id: k,
    method: 'tools/call',
    params: { _meta: { progressToken: k }, name: 'slow_op', arguments: calls[k - 1] },
  });
}

function drop() {
  dropped = true;
  for (let k = 1; k <= calls.length; k++) report(k, 'dropped');
  server.stdin.end();
}

function done() {
  if (outcomes.size === calls.length && !dropped) server.stdin.end();
}

createInterface({ input: server.stdout }).on('line', (line) => {
  if (dropped) return;
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    return;
  }
  if (msg.id === 0 && !initialized) {
    initialized = true;
    write({ method: 'notifications/initialized' });
    call(1);
    setTimeout(() => call(2), 300);
    setTimeout(() => {
      cancelled.add(2);
      report(2, 'cancelled');
      write({ method: 'notifications/cancelled', params: { requestId: 2, reason: 'timeout' } });
      call(3);
    }, 1800);
    return;
  }
  if (msg.id === undefined || msg.method !== undefined) return;
  if (cancelled.has(msg.id)) {
    // The bug: an answer to a cancelled request is taken as a broken connection.
    return drop();
  }
  report(msg.id, msg.error ? 'error' : 'result');
  done();
});

server.on('exit', () => process.exit(0));
write({
  id: 0,
  method: 'initialize',
  params: {
    protocolVersion: '2025-11-25',
    capabilities: {},
    clientInfo: { name: 'mcp-sim-dropping-client', version: '1.0.0' },
  },
});
