// A client built with the TypeScript SDK v1 (npm `@modelcontextprotocol/sdk` 1.32.2, legacy era
// only), driven against `mcp-sim serve` and through `mcp-sim record`.
//
// Usage: node ts_v1_client.mjs PLAN [--connect-timeout MS] (--url URL | -- COMMAND ARGS...)
//
// PLAN is a JSON list of calls made one after the other, each
// `{"steps": N, "step_ms": M, "options": {...}, "progress": true}`: a `tools/call` of `slow_op`
// with the SDK's request options (`timeout`, `resetTimeoutOnProgress`, `maxTotalTimeout`), and an
// `onprogress` callback when `progress` is true. One JSON line per call goes to stdout:
// `{"call": i, "outcome": "result" | "error" | "timeout", "progress": n, "ms": elapsed}`.
// `--connect-timeout MS` is `connect()`'s request timeout; when connecting fails the script
// prints `{"connect": "timeout" | "error", "error": text}` and exits 0.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

let [planText, ...rest] = process.argv.slice(2);
const plan = JSON.parse(planText);
let connectOptions;
if (rest[0] === '--connect-timeout') {
    connectOptions = { timeout: Number(rest[1]) };
    rest = rest.slice(2);
}
let transport;
if (rest[0] === '--url') {
    transport = new StreamableHTTPClientTransport(new URL(rest[1]));
} else {
    const command = rest[0] === '--' ? rest.slice(1) : rest;
    transport = new StdioClientTransport({ command: command[0], args: command.slice(1), stderr: 'inherit' });
}
const client = new Client({ name: 'mcp-sim-ts-v1-client', version: '1.0.0' });
try {
    await client.connect(transport, connectOptions);
} catch (e) {
    const error = String(e?.message ?? e);
    console.log(JSON.stringify({ connect: /time(d)? ?out|timeout/i.test(error) ? 'timeout' : 'error', error }));
    await client.close().catch(() => {});
    process.exit(0);
}
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
        const result = await client.callTool({ name: 'slow_op', arguments: { steps: call.steps, step_ms: call.step_ms } }, undefined, options);
        outcome = result.isError ? 'error' : 'result';
    } catch (e) {
        error = String(e?.message ?? e);
        outcome = /time(d)? ?out|timeout/i.test(error) ? 'timeout' : 'error';
    }
    console.log(JSON.stringify({ call: i, outcome, progress, ms: Date.now() - started, error }));
}
await client.close();
