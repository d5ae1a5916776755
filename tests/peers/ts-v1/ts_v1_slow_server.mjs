// A stdio MCP server built with the TypeScript SDK v1 (npm `@modelcontextprotocol/sdk` 1.32.2,
// legacy era only), for `mcp-sim probe`.
//
// One tool, `slow_op({steps, step_ms})`: it waits `step_ms` milliseconds per step and, when the
// request carried a progressToken, reports progress `1..steps` of `steps` after each step with
// `extra.sendNotification` (which the SDK stops once the request is aborted). The handler checks
// `extra.signal` before each step and stops once a cancel aborted it; the SDK suppresses its
// result.
//
// The tests copy this script beside the installed SDK (target/peers/node-ts-sdk-v1-1.32.2).

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

const server = new McpServer({ name: 'ts-v1-slow-server', version: '1.0.0' });
server.registerTool(
    'slow_op',
    {
        description: 'Wait step_ms ms per step for steps steps, reporting progress after each',
        inputSchema: {
            steps: z.number().int().min(0).max(1000).default(5),
            step_ms: z.number().int().min(0).max(60000).default(200)
        }
    },
    async ({ steps, step_ms }, extra) => {
        const progressToken = extra._meta?.progressToken;
        let done = 0;
        for (let step = 0; step < steps; step++) {
            if (extra.signal.aborted) {
                console.error(`slow_op stopped after ${done} of ${steps} steps`);
                break;
            }
            await sleep(step_ms);
            done++;
            if (progressToken !== undefined) {
                await extra.sendNotification({
                    method: 'notifications/progress',
                    params: { progressToken, progress: done, total: steps }
                });
            }
        }
        return { content: [{ type: 'text', text: `done ${done} of ${steps} steps` }] };
    }
);
await server.connect(new StdioServerTransport());
