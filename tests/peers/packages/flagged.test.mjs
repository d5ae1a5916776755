// A server that answers each cancel: the run fails, with the rule, its level and the replay
// line in the failure's text.
import { test } from "node:test";
import { probe, assertClean } from "mcp-sim";

const SERVERS = JSON.parse(process.env.MCP_SIM_TEST_SERVERS);
const FLAGS = JSON.parse(process.env.MCP_SIM_TEST_FLAGS);
const [command, ...args] = SERVERS["answer-cancel"];

test("the answer-cancel server", async () => {
  assertClean(await probe({ command, args, seed: 1, flags: FLAGS }));
});
