// mcp-sim from Node.js: probe a server, judge a trace, read the verdict as typed values.
//
// The functions run the binary of this platform's package with `--format json` and turn its
// output into a Report. A report is never guessed: an exit code the command does not
// document, or output that is not its JSON verdict, rejects with an McpSimError carrying what
// the command printed.
"use strict";
const { execFile } = require("node:child_process");
const path = require("node:path");

/** The platform packages, by `${process.platform}-${process.arch}`. */
const PLATFORMS = {
  "linux-x64": "@mcp-sim/linux-x64",
  "linux-arm64": "@mcp-sim/linux-arm64",
  "darwin-x64": "@mcp-sim/darwin-x64",
  "darwin-arm64": "@mcp-sim/darwin-arm64",
  "win32-x64": "@mcp-sim/win32-x64",
};

class McpSimError extends Error {
  constructor(message, output) {
    super(message);
    this.name = "McpSimError";
    this.output = output;
  }
}

/** The path of the mcp-sim binary: `MCP_SIM_BIN`, else this platform's package. */
function binaryPath() {
  if (process.env.MCP_SIM_BIN) return process.env.MCP_SIM_BIN;
  const key = `${process.platform}-${process.arch}`;
  const pkg = PLATFORMS[key];
  if (!pkg) throw new McpSimError(`mcp-sim has no binary for ${key}`);
  const exe = process.platform === "win32" ? "mcp-sim.exe" : "mcp-sim";
  try {
    return require.resolve(`${pkg}/bin/${exe}`);
  } catch {
    throw new McpSimError(
      `the package ${pkg} is not installed: npm installs it as an optional dependency of ` +
        `mcp-sim (was it left out with --omit=optional?)`,
    );
  }
}

/**
 * The environment the binary runs in: `sweep --virtual -- node server.js` then runs its
 * program under this package's Node.js shim (`virtual-peer.mjs`, beside the fake timers npm
 * installed with it) instead of installing its own copy.
 */
function binaryEnv() {
  const env = { ...process.env };
  if (!env.MCP_SIM_NODE_SHIM) env.MCP_SIM_NODE_SHIM = path.join(__dirname, "virtual-peer.mjs");
  return env;
}

class Report {
  constructor(raw, exitCode, replay) {
    const violations = (raw.violations || []).map((v) => ({
      rule: v.rule,
      level: v.level,
      spec: v.spec || "",
      message: v.message || "",
      events: v.events || [],
    }));
    this.verdict = raw.verdict || (raw.ok && violations.length === 0 ? "clean" : "violations");
    this.exitCode = Number.isInteger(raw.exit_code) ? raw.exit_code : exitCode;
    this.era = String(raw.era || "");
    this.violations = violations;
    this.findings = (raw.findings || []).map((f) => ({
      finding: f.finding,
      kind: f.kind,
      message: f.message || "",
    }));
    this.replay = raw.replay || replay || "";
    this.raw = raw;
  }

  /** Whether the command passed (exit code 0). */
  get ok() {
    return this.exitCode === 0;
  }

  /** The whole report as text: the verdict, each violation and finding, the replay. */
  summary() {
    const lines = [`mcp-sim: ${this.verdict} (exit ${this.exitCode}, era ${this.era})`];
    for (const v of this.violations) {
      lines.push(`  [${v.level}] ${v.rule}: ${v.message}${v.spec ? `  (${v.spec})` : ""}`);
    }
    for (const f of this.findings) lines.push(`  ${f.finding} (${f.kind}): ${f.message}`);
    lines.push(`replay: ${this.replay}`);
    return lines.join("\n");
  }

  toString() {
    return this.summary();
  }
}

function run(argv, exits, replay, timeoutMs) {
  return new Promise((resolve, reject) => {
    let bin;
    try {
      bin = binaryPath();
    } catch (e) {
      reject(e);
      return;
    }
    execFile(bin, argv, { maxBuffer: 64 << 20, timeout: timeoutMs || 0, env: binaryEnv() }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === "number" ? error.code : -1) : 0;
      if (!exits.includes(code)) {
        reject(new McpSimError(`mcp-sim ${argv[0]} exited ${code}: ${(stderr || stdout).trim()}`, { stdout, stderr }));
        return;
      }
      const line = stdout.split("\n").reverse().find((l) => l.startsWith("{"));
      if (!line) {
        reject(new McpSimError(`no verdict in the output of mcp-sim ${argv[0]}`, { stdout, stderr }));
        return;
      }
      let raw;
      try {
        raw = JSON.parse(line);
      } catch (e) {
        reject(new McpSimError(`the verdict is not JSON (${e.message})`, { stdout, stderr }));
        return;
      }
      resolve(new Report(raw, code, replay));
    });
  });
}

/**
 * Probes a server: `command` and `args` start a stdio server, or `url` names a Streamable
 * HTTP endpoint. `seed`, `era`, `calls` and `baseline` as `mcp-sim probe` takes them;
 * `flags`, any other flags.
 */
function probe(options) {
  const o = options || {};
  if ((o.command == null) === (o.url == null)) {
    return Promise.reject(new TypeError("give a command or a url, not both"));
  }
  const argv = ["probe", "--format", "json", "--seed", String(o.seed ?? 0), "--era", o.era ?? "auto"];
  if (o.calls != null) argv.push("--calls", String(o.calls));
  if (o.baseline != null) argv.push("--baseline", String(o.baseline));
  argv.push(...(o.flags || []));
  if (o.url != null) argv.push("--url", o.url);
  else argv.push("--", o.command, ...(o.args || []));
  return run(argv, [0, 1, 3], "", o.timeoutMs);
}

/** Judges a recorded trace (JSON Lines). */
function checkTrace(file, options) {
  const o = options || {};
  const argv = ["check-trace", "--format", "json", ...(o.flags || [])];
  if (o.baseline != null) argv.push("--baseline", String(o.baseline));
  argv.push(String(file));
  return run(argv, [0, 1], `mcp-sim check-trace ${path.normalize(String(file))}`);
}

/** Throws an assertion error carrying the whole report unless it passed. */
function assertClean(report) {
  if (!report.ok) {
    const { AssertionError } = require("node:assert");
    throw new AssertionError({ message: report.summary(), actual: report.verdict, expected: "clean", operator: "assertClean" });
  }
  return report;
}

module.exports = { probe, checkTrace, assertClean, binaryPath, binaryEnv, Report, McpSimError, PLATFORMS };
