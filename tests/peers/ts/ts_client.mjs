// A client built with the TypeScript SDK v2 (npm `@modelcontextprotocol/client` 2.4.0), driven
// against `mcp-sim serve`.
//
// Usage: node ts_client.mjs PLAN [--sdk-default] (--url URL | -- COMMAND ARGS...)
//
// PLAN is a JSON list of calls made one after the other, each
// `{"steps": N, "step_ms": M, "options": {...}, "progress": true}`: a `tools/call` of `slow_op`
// with the SDK's request options (`timeout`, `resetTimeoutOnProgress`, `maxTotalTimeout`), and an
// `onprogress` callback when `progress` is true (the SDK then puts a progressToken on the
// request). One JSON line per call goes to stdout:
// `{"call": i, "outcome": "result" | "error" | "timeout", "progress": n, "ms": elapsed, "error": text}`.
//
// The tests copy this script beside the installed SDK (target/peers/node-ts-sdk-2.4.0), so that
// Node.js resolves the SDK from that folder's node_modules.

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

let [planText, ...rest] = process.argv.slice(2);
const plan = JSON.parse(planText);
// `--sdk-default`: the SDK's own default negotiation (the 2025-11-25 handshake).
const sdkDefault = rest[0] === '--sdk-default';
if (sdkDefault) {
    rest = rest.slice(1);
}
let transport;
if (rest[0] === '--url') {
    transport = new StreamableHTTPClientTransport(new URL(rest[1]));
} else {
    const command = rest[0] === '--' ? rest.slice(1) : rest;
    transport = new StdioClientTransport({ command: command[0], args: command.slice(1), stderr: 'inherit' });
}
// 2026-07-28 unless `--sdk-default` (the SDK's default is still the 2025-11-25 handshake).
const options = sdkDefault ? {} : { versionNegotiation: { mode: { pin: '2026-07-28' } } };
const client = new Client({ name: 'mcp-sim-ts-client', version: '1.0.0' }, options);
await client.connect(transport);
for (const [i, call] of plan.entries()) {
    let progress = 0;
    const options = { ...(call.options ?? {}) };
    if (call.progress ?? true) {
        options.onprogress = () => {
            progress++;
        };
    }
    const started = Date.now();
    let outcome;
    let error;
    try {
        const result = await client.callTool({ name: 'slow_op', arguments: { steps: call.steps, step_ms: call.step_ms } }, options);
        outcome = result.isError ? 'error' : 'result';
    } catch (e) {
        error = String(e?.message ?? e);
        outcome = /time(d)? ?out|timeout/i.test(error) ? 'timeout' : 'error';
    }
    console.log(JSON.stringify({ call: i, outcome, progress, ms: Date.now() - started, error }));
}
await client.close();
