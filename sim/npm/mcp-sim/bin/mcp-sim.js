#!/usr/bin/env node
// The `mcp-sim` command: runs this platform's binary with the arguments given, passing stdio
// through, and exits as it did.
"use strict";
const { spawnSync } = require("node:child_process");
const { binaryEnv, binaryPath } = require("../index.js");

let bin;
try {
  bin = binaryPath();
} catch (e) {
  console.error(`mcp-sim: ${e.message}`);
  process.exit(2);
}
const run = spawnSync(bin, process.argv.slice(2), { stdio: "inherit", env: binaryEnv() });
if (run.error) {
  console.error(`mcp-sim: cannot run ${bin}: ${run.error.message}`);
  process.exit(2);
}
if (run.signal) {
  process.kill(process.pid, run.signal);
}
process.exit(run.status ?? 2);
