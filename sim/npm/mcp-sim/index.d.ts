/** One broken rule: its name, level, where the spec says it, why, the trace events. */
export interface Violation {
  rule: string;
  level: "MUST" | "SHOULD" | "policy" | string;
  spec: string;
  message: string;
  events: number[];
}

/** What the probe concluded beyond the rules: a fault, or why a run was inconclusive. */
export interface Finding {
  finding: string;
  kind: "fault" | "inconclusive" | string;
  message: string;
}

/** A verdict of mcp-sim. */
export declare class Report {
  /** `clean`, `violations`, `server-fault` or `inconclusive`. */
  readonly verdict: string;
  /** The exit code the command gave (with a baseline, the baseline's verdict). */
  readonly exitCode: number;
  /** The revision the session spoke, as the oracle read it. */
  readonly era: string;
  readonly violations: Violation[];
  readonly findings: Finding[];
  /** The command line that reruns it. */
  readonly replay: string;
  /** The command's JSON verdict as printed. */
  readonly raw: Record<string, unknown>;
  /** Whether the command passed (exit code 0). */
  readonly ok: boolean;
  /** The whole report as text. */
  summary(): string;
}

/** The command could not judge anything: bad usage, an unreadable file, no verdict. */
export declare class McpSimError extends Error {
  readonly output?: { stdout: string; stderr: string };
}

export interface ProbeOptions {
  /** A stdio server's command (with `args`), or... */
  command?: string;
  args?: string[];
  /** ...a Streamable HTTP endpoint. */
  url?: string;
  seed?: number;
  /** `auto`, `modern` or a legacy revision such as `2025-11-25`. */
  era?: string;
  calls?: number;
  /** A file of expected findings. */
  baseline?: string;
  /** Any other `mcp-sim probe` flags. */
  flags?: string[];
  timeoutMs?: number;
}

export declare function probe(options: ProbeOptions): Promise<Report>;
export declare function checkTrace(file: string, options?: { baseline?: string; flags?: string[] }): Promise<Report>;
/** Throws an AssertionError carrying the whole report unless it passed. */
export declare function assertClean(report: Report): Report;
/** The path of the mcp-sim binary of this platform. */
export declare function binaryPath(): string;
/** The environment the binary runs in (with `MCP_SIM_NODE_SHIM`: this package's Node.js shim). */
export declare function binaryEnv(): Record<string, string | undefined>;
export declare const PLATFORMS: Record<string, string>;
