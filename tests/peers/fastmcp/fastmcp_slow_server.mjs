// A slow MCP server built with FastMCP for TypeScript (`fastmcp`, on the TypeScript SDK v1),
// for `mcp-sim probe`.
//
// Usage: node fastmcp_slow_server.mjs [--http PORT] [--stateless]
//
// One tool, `slow_op({steps, step_ms})`: it waits `step_ms` ms per step and reports progress
// 1..steps of steps after each step with `context.reportProgress`, which sends only when the
// request carried a progress token. It does not look at `context.signal`, as most tools
// written with the framework do not: whatever reaches the wire after a cancel is the
// framework's doing, not the tool's.
//
// Without --http it serves stdio; with --http it serves FastMCP's `httpStream` transport
// (mcp-proxy's Streamable HTTP front) on 127.0.0.1:PORT at /mcp and prints
// `listening on http://127.0.0.1:PORT/mcp` to stderr once it accepts connections.
import { FastMCP } from "fastmcp";
import { z } from "zod";

const args = process.argv.slice(2);
const at = args.indexOf("--http");
const port = at >= 0 ? Number(args[at + 1]) : null;
const stateless = args.includes("--stateless");

const server = new FastMCP({ name: "fastmcp-slow", version: "1.0.0" });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

server.addTool({
  name: "slow_op",
  description: "Wait step_ms ms per step for steps steps, reporting progress after each",
  parameters: z.object({ steps: z.number(), step_ms: z.number() }),
  execute: async ({ steps, step_ms }, { reportProgress }) => {
    for (let i = 1; i <= steps; i++) {
      await sleep(step_ms);
      await reportProgress({ progress: i, total: steps });
    }
    return `done ${steps} of ${steps} steps`;
  },
});

if (port === null) {
  await server.start({ transportType: "stdio" });
} else {
  await server.start({
    transportType: "httpStream",
    httpStream: { host: "127.0.0.1", port, endpoint: "/mcp", stateless },
  });
  process.stderr.write(`listening on http://127.0.0.1:${port}/mcp\n`);
}
