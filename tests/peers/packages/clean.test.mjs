// Servers that pass: the pinned Python SDK server, and the TypeScript SDK server with its
// known finding in a baseline.
import { test } from "node:test";
import assert from "node:assert/strict";
import { probe, assertClean, checkTrace } from "mcp-sim";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const SERVERS = JSON.parse(process.env.MCP_SIM_TEST_SERVERS);
const FLAGS = JSON.parse(process.env.MCP_SIM_TEST_FLAGS);
const BASELINES = JSON.parse(process.env.MCP_SIM_TEST_BASELINES || "{}");
const server = (name) => ({ command: SERVERS[name][0], args: SERVERS[name].slice(1) });

test("the Python SDK server passes", async () => {
  const report = assertClean(await probe({ ...server("python-sdk"), seed: 1, flags: FLAGS }));
  assert.equal(report.verdict, "clean", report.summary());
  assert.match(report.replay, /^mcp-sim probe --seed 1/);
});

test("the TypeScript SDK server passes with its baseline", async () => {
  const baseline = BASELINES["typescript-sdk"];
  assertClean(await probe({ ...server("typescript-sdk"), seed: 1, flags: FLAGS, baseline }));
});

test("a trace is judged too", async () => {
  const trace = join(mkdtempSync(join(tmpdir(), "mcp-sim-")), "trace.jsonl");
  const report = await probe({ ...server("python-sdk"), seed: 1, flags: [...FLAGS, "--trace", trace] });
  assertClean(report);
  const judged = assertClean(await checkTrace(trace));
  assert.equal(judged.era, report.era);
});

test("bad usage is a typed error naming it", async () => {
  await assert.rejects(probe({ ...server("python-sdk"), era: "nope" }), (e) => {
    assert.equal(e.name, "McpSimError");
    assert.match(e.message, /mcp-sim probe exited 2: .*nope/s);
    return true;
  });
});
