// A stdio MCP server built with the TypeScript SDK v2 (npm `@modelcontextprotocol/server`
// 2.4.0), for `mcp-sim probe`.
//
// One tool, `slow_op({steps, step_ms})`: it waits `step_ms` milliseconds per step and, when the
// request carried a progressToken, reports progress `1..steps` of `steps` after each step with
// `ctx.mcpReq.notify` (the SDK's progress API for a handler). Cancellation is handled as the
// SDK's guide shows: `ctx.mcpReq.signal` is checked before each step and the loop stops once it
// is aborted; the SDK drops whatever the handler then returns.
//
// The SDK is installed by the tests into the build folder (package.json and package-lock.json
// beside this file pin it); this script is copied there, so that Node.js resolves the SDK from
// that folder's node_modules. Run: `node target/peers/node-ts-sdk-2.4.0/ts_slow_server.mjs`.
// Diagnostics go to stderr, which the probe reads and ignores.

import { McpServer } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import * as z from 'zod';

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

serveStdio(() => {
    const server = new McpServer({ name: 'ts-slow-server', version: '1.0.0' });
    server.registerTool(
        'slow_op',
        {
            description: 'Wait step_ms ms per step for steps steps, reporting progress after each',
            inputSchema: z.object({
                steps: z.number().int().min(0).max(1000).default(5),
                step_ms: z.number().int().min(0).max(60000).default(200)
            })
        },
        async ({ steps, step_ms }, ctx) => {
            const progressToken = ctx.mcpReq._meta?.progressToken;
            let done = 0;
            for (let step = 0; step < steps; step++) {
                if (ctx.mcpReq.signal.aborted) {
                    console.error(`slow_op stopped after ${done} of ${steps} steps: ${ctx.mcpReq.signal.reason}`);
                    break;
                }
                await sleep(step_ms);
                done++;
                if (progressToken !== undefined) {
                    await ctx.mcpReq.notify({
                        method: 'notifications/progress',
                        params: { progressToken, progress: done, total: steps, message: `step ${done} of ${steps}` }
                    });
                }
            }
            return { content: [{ type: 'text', text: `done ${done} of ${steps} steps` }] };
        }
    );
    return server;
});
