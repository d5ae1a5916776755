// A legacy-era stdio client that cannot bear an answer to a request it cancelled: on one, it
// drops its connection (closes the server's stdin and gives every open call up), as
// claude-code #51073 does. Otherwise it is the TS SDK v1 client's session of
// tests/recordings/python-sdk-1.30.0-stdio.jsonl: three slow_op calls, the second cancelled
// 1.5 s after it went out, the third sent with that cancel.
//
// With --tolerant before the `--`, it is the correct client of the same session: an answer to
// a request it cancelled is ignored, as the spec asks. With --plan JSON, the session is
// another: a list of {"steps", "step_ms", "at", "cancel_at"?}, each call sent `at` ms after
// the handshake and cancelled at `cancel_at` (cancels before calls due at the same moment).
//
// Usage: node dropping_client.mjs [--tolerant] [--plan JSON] -- COMMAND ARGS...
// Prints one JSON line per call: {"call": k, "outcome": "result" | "error" | "cancelled" |
// "dropped"}. No dependencies: the wire is written by hand.

import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

const sep = process.argv.indexOf('--');
if (sep < 0 || sep + 1 >= process.argv.length) {
  console.error('usage: node dropping_client.mjs [--tolerant] [--plan JSON] -- COMMAND ARGS...');
  process.exit(2);
}
const options = process.argv.slice(2, sep);
const tolerant = options.includes('--tolerant');
const planAt = options.indexOf('--plan');
const [command, ...args] = process.argv.slice(sep + 1);
const server = spawn(command, args, { stdio: ['pipe', 'pipe', 'inherit'] });
const write = (msg) => server.stdin.write(JSON.stringify({ jsonrpc: '2.0', ...msg }) + '\n');

const plan =
  planAt >= 0
    ? JSON.parse(options[planAt + 1])
    : [
        { steps: 3, step_ms: 100, at: 0 },
        { steps: 25, step_ms: 200, at: 300, cancel_at: 1800 },
        { steps: 2, step_ms: 100, at: 1800 },
      ];
const calls = plan.map(({ steps, step_ms }) => ({ steps, step_ms }));
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
    // Each moment's steps in one timer: its cancels, then its calls, in plan order.
    const moments = new Map();
    const at = (t, step) => moments.set(t, [...(moments.get(t) ?? []), step]);
    plan.forEach((c, i) => {
      if (c.cancel_at !== undefined) at(c.cancel_at, { cancel: i + 1 });
    });
    plan.forEach((c, i) => at(c.at, { call: i + 1 }));
    for (const [t, steps] of moments) {
      const run = () => {
        for (const step of steps) {
          if (step.cancel !== undefined) {
            if (outcomes.has(step.cancel)) continue;
            cancelled.add(step.cancel);
            report(step.cancel, 'cancelled');
            write({
              method: 'notifications/cancelled',
              params: { requestId: step.cancel, reason: 'timeout' },
            });
          } else {
            call(step.call);
          }
        }
      };
      if (t === 0) run();
      else setTimeout(run, t);
    }
    return;
  }
  if (msg.id === undefined || msg.method !== undefined) return;
  if (cancelled.has(msg.id)) {
    // The bug: an answer to a cancelled request is taken as a broken connection.
    if (!tolerant) return drop();
    return;
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
