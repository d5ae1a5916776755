// Runs a real, unmodified Node.js MCP server under mcp-sim's virtual clock.
//
// mcp-sim starts one process per run: `node virtual-peer.mjs server.js ARGS` (ES module or
// CommonJS), and drives it over the process's stdin and stdout with one JSON object a line:
// the control protocol that mcp-sim's Python shim speaks too (sim/python/mcp_sim/
// virtual_peer.py documents it). The program's own stdin, stdout and clock are virtual; its
// stderr is its own.
//
// The process greets with `{"node": VERSION}` and waits for `{"op": "spawn", "seed", "t",
// "transport"}`: only then does it seed the entropy, set the clock and load the program, so
// that nothing the program does depends on when the process started. After that: `deliver`,
// `close`, `advance`, `request`, `disconnect` and `end`, each answered by a report once the
// program is quiescent, as in the Python shim.
//
// Determinism
// - Timers, `Date`, `performance.now`, `process.hrtime` (and the `timers` and
//   `timers/promises` modules) are @sinonjs/fake-timers' (pinned): a well-kept library that
//   every Node.js test runner's fake timers build on, and the only one that fakes all of them
//   and lets a driver see the next timer. `setImmediate`, `process.nextTick` and microtasks
//   stay native: streams need them (faking them stalls a Readable), and they carry no time.
// - Quiescent means: no native immediate is pending and no libuv request (a file read or
//   close, a crypto job) is in flight, for two turns of the event loop running nothing else.
//   The program's stdio is in memory, so nothing else can wake it but a faked timer, which
//   only the driver fires.
// - `Math.random`, `crypto.randomUUID`, `crypto.getRandomValues`, `crypto.randomBytes` (and
//   `randomFillSync`, `randomInt`) draw from the run's seed (xoshiro128**).
// - HTTP: `Server.prototype.listen` binds nothing; each request of the control protocol is
//   written as HTTP/1.1 into an in-memory socket the server receives as a connection, so the
//   program's own stack (Node's parser, express, the SDK's transport) handles it, and the
//   response's bytes are read back as status, headers and body pieces.
// - Escapes (a real socket, a DNS lookup, a child process, a worker thread, a file
//   descriptor read directly) are named in the report: such a run is `not-replayable`.
//
// A client program (`"role": "client"` in `spawn`) gets mcp-sim's reference server as the child
// process it spawns, whatever the command (`VirtualChild`): `deliver` with `"child": true` is
// then bytes on that child's stdout and `{"op": "exit", "t", "code"}` its end; the report's
// `out` also holds `{"t", "spawned": ARGV}`, `{"t", "child": true, "data"}` (written on its
// stdin), `{"t", "closed": true}` (its stdin ended) and `{"t", "killed": N}`.
// Its TCP connections (`net.connect`, and so `fetch`) are mcp-sim's too: `{"t", "connect": N,
// "host", "port"}`, `{"t", "conn": N, "data"}` and `{"t", "conn": N, "closed": true}` in `out`,
// `deliver` and `close` with `"conn": N` from mcp-sim. The client's own stdout goes to its
// stderr, and it ends when nothing would keep its loop alive under `node`.
//
// A bridge (`"role": "bridge"`: an intermediary) is both: its stdin and stdout (or its HTTP
// server) are its front, served as a server's are, and the child it spawns and the
// connections it opens are its upstream, as a client's are.
//
// Control goes over file descriptors 0 and 1 with synchronous reads and writes: while the
// driver decides, nothing in the program can run.

import { EventEmitter } from "node:events";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createRequire, syncBuiltinESMExports } from "node:module";
import { Duplex, Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const require = createRequire(import.meta.url);
const FakeTimers = require("@sinonjs/fake-timers");

const EPOCH_MS = 1_767_225_600_000; // 2026-01-01T00:00:00Z: the virtual wall clock's start
const realSetImmediate = globalThis.setImmediate;
const realSetInterval = globalThis.setInterval;
const rawReadSync = fs.readSync;
const rawWriteSync = fs.writeSync;

// ---------------------------------------------------------------------------------------------
// Control channel.

const control = {
  buf: Buffer.alloc(0),
  read() {
    for (;;) {
      const nl = this.buf.indexOf(10);
      if (nl >= 0) {
        const line = this.buf.subarray(0, nl).toString("utf8");
        this.buf = this.buf.subarray(nl + 1);
        return JSON.parse(line);
      }
      const chunk = Buffer.alloc(65536);
      let n;
      try {
        n = rawReadSync(0, chunk, 0, chunk.length, null);
      } catch (e) {
        if (e.code === "EAGAIN") continue;
        realExit(0);
      }
      if (n === 0) realExit(0); // mcp-sim went away
      this.buf = Buffer.concat([this.buf, chunk.subarray(0, n)]);
    }
  },
  write(obj) {
    let data = Buffer.from(JSON.stringify(obj) + "\n", "utf8");
    while (data.length) {
      let n;
      try {
        n = rawWriteSync(1, data);
      } catch (e) {
        if (e.code === "EAGAIN") continue;
        realExit(0);
      }
      data = data.subarray(n);
    }
  },
};

const realExit = process.reallyExit
  ? (code) => process.reallyExit(code)
  : (code) => process.exit(code);

// ---------------------------------------------------------------------------------------------
// Entropy: xoshiro128** seeded by splitmix32 from the run's seed.

function rng(seed) {
  let x = Number(BigInt.asUintN(32, BigInt(seed))) >>> 0;
  let y = Number(BigInt.asUintN(32, BigInt(seed) >> 32n)) >>> 0;
  const split = () => {
    x = (x + 0x9e3779b9) >>> 0;
    let z = x ^ y;
    y = (y + 0x6d2b79f5) >>> 0;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    return (z ^ (z >>> 16)) >>> 0;
  };
  const s = [split(), split(), split(), split()];
  const next = () => {
    const r = Math.imul(rotl(Math.imul(s[1], 5), 7), 9) >>> 0;
    const t = s[1] << 9;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 11);
    return r;
  };
  return next;
}
const rotl = (v, k) => ((v << k) | (v >>> (32 - k))) >>> 0;

let draw = rng(0);

function fill(view) {
  const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
  for (let i = 0; i < bytes.length; i += 4) {
    let r = draw();
    for (let j = 0; j < 4 && i + j < bytes.length; j++, r >>>= 8) bytes[i + j] = r & 0xff;
  }
  return view;
}

function patchEntropy() {
  Math.random = () => (draw() * 2 ** 21 + (draw() >>> 11)) / 2 ** 53;
  const crypto = require("node:crypto");
  const uuid = () => {
    const b = fill(new Uint8Array(16));
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    const h = Buffer.from(b).toString("hex");
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  };
  const getRandomValues = (view) => fill(view);
  const randomBytes = (n, cb) => {
    const buf = fill(Buffer.alloc(n));
    if (cb) {
      process.nextTick(cb, null, buf);
      return undefined;
    }
    return buf;
  };
  const randomFillSync = (buf, offset = 0, size) => {
    const view = new Uint8Array(buf.buffer ?? buf, (buf.byteOffset ?? 0) + offset, size ?? buf.byteLength - offset);
    fill(view);
    return buf;
  };
  const randomInt = (min, max, cb) => {
    if (max === undefined || typeof max === "function") [min, max, cb] = [0, min, max];
    const v = min + Math.floor(Math.random() * (max - min));
    if (cb) return process.nextTick(cb, null, v);
    return v;
  };
  const patched = { randomUUID: uuid, getRandomValues, randomBytes, randomFillSync, randomInt };
  for (const [name, value] of Object.entries(patched)) define(crypto, name, value);
  for (const web of [crypto.webcrypto, globalThis.crypto]) {
    if (!web) continue;
    define(web, "getRandomValues", getRandomValues);
    define(web, "randomUUID", uuid);
  }
}

/** Replaces a property, whether it is a value or a getter; one that cannot be replaced
 * (`node:crypto`'s `getRandomValues`, a fixed getter) forwards to the one patched on
 * `webcrypto`. */
function define(object, name, value) {
  const own = Object.getOwnPropertyDescriptor(object, name);
  if (own && !own.configurable) return;
  Object.defineProperty(object, name, { configurable: true, enumerable: true, writable: true, value });
}

// ---------------------------------------------------------------------------------------------
// The clock.

let clock = null;

function installClock(tMs) {
  clock = FakeTimers.withGlobal(globalThis).install({
    now: EPOCH_MS + tMs,
    toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval", "Date", "hrtime", "performance"],
    ignoreMissingTimers: true,
  });
}

/**
 * What would keep a client's Node.js loop alive: a referenced faked timer, or its server
 * process. (The timers' own objects say whether they are referenced; the heap's entries are
 * the library's, so `unref` and `ref` are followed by id.)
 */
const nothingKeepsAlive = {
  unref: new Set(),
  track() {
    for (const name of ["setTimeout", "setInterval"]) {
      const faked = globalThis[name];
      const unref = this.unref;
      globalThis[name] = function (...args) {
        const timer = faked.apply(this, args);
        if (timer && typeof timer === "object") {
          const id = Number(timer);
          const [u, r] = [timer.unref, timer.ref];
          timer.unref = function () {
            unref.add(id);
            return u.call(this);
          };
          timer.ref = function () {
            unref.delete(id);
            return r.call(this);
          };
        }
        return timer;
      };
    }
  },
  hasWork() {
    if (VirtualChild.current) return true;
    if ([...VirtualSocket.open.values()].some((socket) => socket.refed)) return true;
    return [...(clock?.timers?.values() ?? [])].some((t) => !this.unref.has(Number(t.id)));
  },
};

const nowMs = () => (clock ? Math.floor(clock.now - EPOCH_MS) : 0);

function nextDeadline() {
  const first = clock?.timerHeap?.peek();
  if (!first) return null;
  return Math.max(nowMs(), Math.ceil(first.callAt - EPOCH_MS));
}

// ---------------------------------------------------------------------------------------------
// What the program wrote, and escapes.

const out = [];
const escapes = [];
const seenEscapes = new Set();

function where() {
  const stack = new Error().stack.split("\n").slice(2);
  const own = import.meta.url;
  for (const line of stack) {
    if (line.includes(own) || line.includes("node:")) continue;
    const m = line.match(/\(?((?:file:\/\/)?[^()\s]+:\d+):\d+\)?$/);
    if (m) return m[1].replace(/^file:\/\//, "");
  }
  return "the program";
}

function escape(what, at = where()) {
  const key = `${what}@${at}`;
  if (seenEscapes.has(key) || !armed) return;
  seenEscapes.add(key);
  escapes.push({ what, where: at });
}

let armed = false;
let exited = false;
let transport = "stdio";
// "server": the program serves on its stdin and stdout (or HTTP); "bridge": it does, and also
// reaches an upstream as a client does; "client": the program is a client whose server
// process is mcp-sim's (`VirtualChild`).
let role = "server";

function report(extra = {}) {
  const msg = { t: nowMs(), out: out.splice(0), next: exited ? null : nextDeadline(), escapes: escapes.splice(0) };
  Object.assign(msg, extra);
  control.write(msg);
}

// ---------------------------------------------------------------------------------------------
// stdio.

class VirtualStdin extends Readable {
  _read() {}
}

/** The program's stdout: its transport on stdio; over HTTP only its logs, sent to stderr. */
class VirtualStdout extends Writable {
  _write(chunk, encoding, callback) {
    const text = Buffer.isBuffer(chunk) ? chunk.toString("utf8") : String(chunk);
    if (transport !== "stdio" || role === "client") process.stderr.write(text);
    else if (text.length) out.push({ t: nowMs(), data: text });
    callback();
  }
}

function installStdio() {
  const stdin = new VirtualStdin();
  const emit = stdin.emit;
  stdin.emit = function (event, chunk, ...rest) {
    if (event === "data" && chunk != null) out.push({ t: nowMs(), read: Buffer.byteLength(chunk) });
    return emit.call(this, event, chunk, ...rest);
  };
  stdin.fd = 0;
  stdin.isTTY = false;
  const stdout = new VirtualStdout();
  stdout.fd = 1;
  stdout.isTTY = false;
  Object.defineProperty(process, "stdin", { configurable: true, enumerable: true, get: () => stdin });
  Object.defineProperty(process, "stdout", { configurable: true, enumerable: true, get: () => stdout });
  return stdin;
}

// ---------------------------------------------------------------------------------------------
// A client's server: the child process it spawns is mcp-sim's reference server.

// Above Linux's largest pid (2**22): a signal sent to it reaches no real process.
const FAKE_PID = 4_194_304 + 7;

/**
 * The server a client program spawns (`child_process.spawn`, and so cross-spawn and the SDKs'
 * stdio transports), whatever command it names: its stdin is what the program writes (reported
 * as `data`, its end as `closed`), its stdout what mcp-sim delivers; its exit is mcp-sim's to
 * say (`exit`), or the program's (`kill`: reported as `killed`).
 */
class VirtualChild extends EventEmitter {
  static current = null;

  constructor(argv, options) {
    super();
    const child = this;
    this.pid = FAKE_PID;
    this.spawnfile = argv[0];
    this.spawnargs = argv;
    this.exitCode = null;
    this.signalCode = null;
    this.killed = false;
    this.connected = false;
    const stdio = Array.isArray(options?.stdio) ? options.stdio : [options?.stdio ?? "pipe", options?.stdio ?? "pipe", options?.stdio ?? "pipe"];
    this.stdin = new Writable({
      write(chunk, encoding, callback) {
        if (!child.gone()) out.push({ t: nowMs(), child: true, data: Buffer.from(chunk, encoding).toString("utf8") });
        callback();
      },
      final(callback) {
        if (!child.gone()) out.push({ t: nowMs(), closed: true });
        callback();
      },
    });
    this.stdout = new Readable({ read() {} });
    this.stderr = (stdio[2] ?? "pipe") === "pipe" ? new Readable({ read() {} }) : null;
    this.stdio = [this.stdin, this.stdout, this.stderr];
    options?.signal?.addEventListener?.("abort", () => this.kill("SIGTERM"), { once: true });
    VirtualChild.current = this;
    out.push({ t: nowMs(), spawned: argv.map(String) });
    process.nextTick(() => this.emit("spawn"));
  }

  gone() {
    return this.exitCode !== null || this.signalCode !== null;
  }

  kill(signal = "SIGTERM") {
    if (this.gone()) return false;
    const number = typeof signal === "number" ? signal : (os.constants.signals[signal] ?? 15);
    const name = typeof signal === "string" ? signal : Object.keys(os.constants.signals).find((k) => os.constants.signals[k] === signal);
    if (number === 0) return true;
    out.push({ t: nowMs(), killed: number });
    this.killed = true;
    this.exited(null, name ?? "SIGTERM");
    return true;
  }

  /** The server is gone: its pipes end, then `exit` and `close`, as Node.js reports them. */
  exited(code, signal) {
    if (this.gone()) return;
    this.exitCode = code;
    this.signalCode = signal;
    this.stdout.push(null);
    this.stderr?.push(null);
    if (VirtualChild.current === this) VirtualChild.current = null;
    process.nextTick(() => {
      this.emit("exit", code, signal);
      realSetImmediate(() => this.emit("close", code, signal));
    });
  }

  ref() {}
  unref() {}
  disconnect() {}
}

function virtualSpawn(command, args, options) {
  if (!Array.isArray(args)) {
    options = args;
    args = [];
  }
  if (VirtualChild.current) {
    escape("a second server process was started while the first runs");
    throw new Error("mcp-sim: one server process at a time");
  }
  const argv = options?.shell ? ["/bin/sh", "-c", [command, ...args].join(" ")] : [command, ...args];
  return new VirtualChild(argv, options);
}

/**
 * A client's TCP connection (`net.connect`, and so `fetch` and the SDKs' HTTP transports), to
 * whatever host and port: mcp-sim's reference server over HTTP. What the program writes is
 * reported as `{"conn": N, "data"}` (its end as `closed`); what mcp-sim delivers on N is what
 * it reads, mcp-sim's close its end.
 */
class VirtualSocket extends Duplex {
  static open = new Map();
  static count = 0;

  constructor(host, port) {
    super({ allowHalfOpen: false });
    this.id = ++VirtualSocket.count;
    this.remoteAddress = "127.0.0.1";
    this.remotePort = Number(port) || 80;
    this.remoteFamily = "IPv4";
    this.localAddress = "127.0.0.1";
    this.localPort = 40000 + (this.id % 20000);
    this.connecting = false;
    this.pending = false;
    this.readyState = "open";
    this.refed = true;
    this.reported = false;
    VirtualSocket.open.set(this.id, this);
    out.push({ t: nowMs(), connect: this.id, host: String(host ?? "localhost"), port: this.remotePort });
    process.nextTick(() => {
      this.emit("connect");
      this.emit("ready");
    });
  }
  _read() {}
  _write(chunk, encoding, callback) {
    if (!this.reported) out.push({ t: nowMs(), conn: this.id, data: Buffer.from(chunk, encoding).toString("utf8") });
    callback();
  }
  _final(callback) {
    this.closeReported();
    callback();
  }
  _destroy(err, callback) {
    this.closeReported();
    this.readyState = "closed";
    callback(err);
  }
  closeReported() {
    if (!this.reported) {
      this.reported = true;
      out.push({ t: nowMs(), conn: this.id, closed: true });
    }
    VirtualSocket.open.delete(this.id);
  }
  /** The server closed the connection: end of file, and the socket is done. */
  ended() {
    this.reported = true;
    VirtualSocket.open.delete(this.id);
    this.push(null);
    realSetImmediate(() => this.destroy());
  }
  setNoDelay() { return this; }
  setKeepAlive() { return this; }
  setTimeout() { return this; }
  ref() { this.refed = true; return this; }
  unref() { this.refed = false; return this; }
  address() { return { address: this.localAddress, family: "IPv4", port: this.localPort }; }
}

function virtualConnect(...args) {
  let options = args[0];
  if (typeof options !== "object" || options === null) options = { port: args[0], host: typeof args[1] === "string" ? args[1] : "localhost" };
  const callback = args.find((a) => typeof a === "function");
  const socket = new VirtualSocket(options.host ?? options.hostname, options.port);
  if (callback) socket.once("connect", callback);
  return socket;
}

// ---------------------------------------------------------------------------------------------
// HTTP: the program's server, fed through in-memory sockets.

// `pending`: a bridge's requests that came before it listened (it may listen only once its
// upstream is ready), handed to its server when it does, as a live check probes a front once
// it accepts connections.
const http = { server: null, streams: new Map(), pending: [] };

class MemorySocket extends Duplex {
  constructor(stream) {
    super();
    this.stream = stream;
    this.remoteAddress = "127.0.0.1";
    this.remotePort = 40000 + (stream % 20000);
    this.remoteFamily = "IPv4";
    this.localAddress = "127.0.0.1";
    this.localPort = 8000;
    this.parse = new ResponseReader(stream);
  }
  _read() {}
  _write(chunk, encoding, callback) {
    this.parse.feed(Buffer.from(chunk, encoding));
    callback();
  }
  _final(callback) {
    this.parse.finish();
    callback();
  }
  setTimeout() { return this; }
  setNoDelay() { return this; }
  setKeepAlive() { return this; }
  ref() { return this; }
  unref() { return this; }
  address() { return { address: this.localAddress, port: this.localPort, family: "IPv4" }; }
  get readyState() { return this.destroyed ? "closed" : "open"; }
}

const DROPPED_HEADERS = new Set(["transfer-encoding", "connection", "keep-alive", "date"]);

/** Reads the HTTP/1.1 response a server writes to one socket: its head, then its body. */
class ResponseReader {
  constructor(stream) {
    this.stream = stream;
    this.buf = Buffer.alloc(0);
    this.state = "head";
    this.left = 0;
    this.chunked = false;
  }
  feed(bytes) {
    this.buf = Buffer.concat([this.buf, bytes]);
    for (;;) {
      if (this.state === "head") {
        const end = this.buf.indexOf("\r\n\r\n");
        if (end < 0) return;
        const lines = this.buf.subarray(0, end).toString("latin1").split("\r\n");
        this.buf = this.buf.subarray(end + 4);
        const status = Number(lines[0].split(" ")[1]);
        const headers = {};
        for (const line of lines.slice(1)) {
          const colon = line.indexOf(":");
          const name = line.slice(0, colon).trim().toLowerCase();
          const value = line.slice(colon + 1).trim();
          if (name === "transfer-encoding") this.chunked = /chunked/i.test(value);
          if (DROPPED_HEADERS.has(name)) continue;
          headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
        }
        out.push({ t: nowMs(), stream: this.stream, status, headers });
        if (this.chunked) this.state = "size";
        else if ("content-length" in headers) {
          this.left = Number(headers["content-length"]);
          this.state = "length";
          if (this.left === 0) this.end();
        } else this.state = "rest";
      } else if (this.state === "size") {
        const nl = this.buf.indexOf("\r\n");
        if (nl < 0) return;
        this.left = parseInt(this.buf.subarray(0, nl).toString("latin1"), 16);
        this.buf = this.buf.subarray(nl + 2);
        if (this.left === 0) {
          this.end();
          return;
        }
        this.state = "chunk";
      } else if (this.state === "chunk") {
        if (this.buf.length < this.left + 2) return;
        this.body(this.buf.subarray(0, this.left));
        this.buf = this.buf.subarray(this.left + 2);
        this.state = "size";
      } else if (this.state === "length" || this.state === "rest") {
        if (!this.buf.length) return;
        const take = this.state === "length" ? Math.min(this.left, this.buf.length) : this.buf.length;
        this.body(this.buf.subarray(0, take));
        this.buf = this.buf.subarray(take);
        this.left -= take;
        if (this.state === "length" && this.left === 0) this.end();
      } else return;
    }
  }
  body(bytes) {
    if (bytes.length) out.push({ t: nowMs(), stream: this.stream, body: bytes.toString("utf8") });
  }
  end() {
    if (this.state === "done") return;
    this.state = "done";
    out.push({ t: nowMs(), stream: this.stream, end: true });
  }
  finish() {
    if (this.state === "rest") this.end();
  }
}

function patchListen() {
  const net = require("node:net");
  const nodeHttp = require("node:http");
  const listen = net.Server.prototype.listen;
  net.Server.prototype.listen = function (...args) {
    if (!(this instanceof nodeHttp.Server)) {
      escape("a server socket was bound");
      return listen.apply(this, args);
    }
    const callback = args.find((a) => typeof a === "function");
    const options = typeof args[0] === "object" && args[0] !== null ? args[0] : {};
    const port = Number(options.port ?? (typeof args[0] !== "object" ? args[0] : 0)) || 8000;
    const host = options.host ?? (typeof args[1] === "string" ? args[1] : "127.0.0.1");
    http.server = this;
    http.host = `${host}:${port}`;
    this.address = () => ({ address: host, port, family: "IPv4" });
    Object.defineProperty(this, "listening", { configurable: true, get: () => http.server === this });
    this.close = function (cb) {
      if (http.server === this) http.server = null;
      process.nextTick(() => this.emit("close"));
      if (cb) process.nextTick(cb);
      return this;
    };
    process.nextTick(() => {
      this.emit("listening");
      if (callback) callback();
      for (const cmd of http.pending.splice(0)) httpRequest(cmd);
    });
    return this;
  };
}

function httpRequest(cmd) {
  if (!http.server && role === "bridge") {
    http.pending.push(cmd);
    return;
  }
  if (!http.server) {
    escape("an HTTP request came but the program listens on no HTTP server", "shim");
    return;
  }
  const socket = new MemorySocket(cmd.stream);
  http.streams.set(cmd.stream, socket);
  const body = Buffer.from(cmd.body ?? "", "utf8");
  let head = `${cmd.method} ${cmd.path ?? "/mcp"} HTTP/1.1\r\n`;
  // The host the program bound, unless the request names another (a rebinding check).
  const headers = { host: http.host, ...cmd.headers };
  headers["content-length"] = String(body.length);
  for (const [name, value] of Object.entries(headers)) head += `${name}: ${value}\r\n`;
  head += "\r\n";
  http.server.emit("connection", socket);
  socket.push(Buffer.concat([Buffer.from(head, "latin1"), body]));
}

function httpDisconnect(stream) {
  http.pending = http.pending.filter((cmd) => cmd.stream !== stream);
  const socket = http.streams.get(stream);
  if (!socket) return;
  http.streams.delete(stream);
  socket.parse.state = "done";
  socket.destroy();
}

// ---------------------------------------------------------------------------------------------
// Escapes that the shim watches.

function patchEscapes() {
  const net = require("node:net");
  for (const name of ["connect", "createConnection"]) {
    const f = net[name];
    net[name] = function (...args) {
      if (role !== "server") return virtualConnect(...args);
      return f.apply(this, args);
    };
  }
  const connect = net.Socket.prototype.connect;
  net.Socket.prototype.connect = function (...args) {
    escape("a real socket connected");
    return connect.apply(this, args);
  };
  const dns = require("node:dns");
  for (const name of ["lookup", "resolve", "resolve4", "resolve6"]) {
    const f = dns[name];
    dns[name] = function (...args) {
      escape(`a DNS ${name}`);
      return f.apply(this, args);
    };
  }
  const cp = require("node:child_process");
  for (const name of ["spawn", "spawnSync", "exec", "execSync", "execFile", "execFileSync", "fork"]) {
    const f = cp[name];
    cp[name] = function (...args) {
      if (role !== "server" && name === "spawn") return virtualSpawn(...args);
      escape(`a child process (${name})`);
      return f.apply(this, args);
    };
  }
  const wt = require("node:worker_threads");
  const Worker = wt.Worker;
  wt.Worker = class extends Worker {
    constructor(...args) {
      escape("a worker thread");
      super(...args);
    }
  };
  fs.readSync = function (fd, ...args) {
    if (fd === 0 && armed) escape("the program read file descriptor 0 directly");
    return rawReadSync.call(this, fd, ...args);
  };
  fs.writeSync = function (fd, ...args) {
    if (fd === 1 && armed) {
      escape("the program wrote file descriptor 1 directly");
      return typeof args[0] === "string" ? Buffer.byteLength(args[0]) : args[0].length;
    }
    return rawWriteSync.call(this, fd, ...args);
  };
}

// ---------------------------------------------------------------------------------------------
// Quiescence.

// Work in flight: native immediates, and libuv requests (a file read, a close, a write on a
// pipe, a crypto or DNS job), which end by themselves. Handles (a pipe, a timer, a server
// socket) live on and are never waited for.
const BUSY = /^Immediate$|Req|^WriteWrap$|^ShutdownWrap$|Job$/;

function turn() {
  return new Promise((resolve) => realSetImmediate(resolve));
}

// WebAssembly compiled off the loop's thread (undici's HTTP parser, which `fetch` compiles on
// its first connection) ends by itself too, but libuv does not see it: counted here.
const wasm = { inFlight: 0 };
for (const name of ["compile", "instantiate", "compileStreaming", "instantiateStreaming"]) {
  const f = WebAssembly[name];
  if (typeof f !== "function") continue;
  WebAssembly[name] = function (...args) {
    wasm.inFlight++;
    const done = () => {
      wasm.inFlight--;
    };
    const promise = f.apply(this, args);
    promise.then(done, done);
    return promise;
  };
}

async function settle() {
  for (let quiet = 0; quiet < 2; ) {
    await turn();
    const busy = wasm.inFlight > 0 || process.getActiveResourcesInfo().some((kind) => BUSY.test(kind));
    quiet = busy ? 0 : quiet + 1;
  }
}

/** Fires the timers due before `target` and moves the clock to it, those due at it pending. */
async function advanceBefore(target) {
  for (;;) {
    const first = clock.timerHeap?.peek();
    if (!first || first.callAt >= EPOCH_MS + target) break;
    clock.next();
    await settle();
  }
  if (EPOCH_MS + target > clock.now) clock.now = EPOCH_MS + target;
}

async function advanceTo(target) {
  for (;;) {
    const first = clock.timerHeap?.peek();
    if (!first || first.callAt > EPOCH_MS + target) break;
    clock.next();
    await settle();
  }
  const now = nowMs();
  if (target > now) clock.tick(target - now);
}

// ---------------------------------------------------------------------------------------------
// The program.

function isModule(file) {
  if (file.endsWith(".mjs")) return true;
  if (file.endsWith(".cjs")) return false;
  for (let dir = path.dirname(file); ; dir = path.dirname(dir)) {
    const pkg = path.join(dir, "package.json");
    if (fs.existsSync(pkg)) {
      try {
        return JSON.parse(fs.readFileSync(pkg, "utf8")).type === "module";
      } catch {
        return false;
      }
    }
    if (path.dirname(dir) === dir) return false;
  }
}

async function loadProgram(file) {
  if (isModule(file)) {
    await import(pathToFileURL(file).href);
  } else {
    const Module = require("node:module");
    Module._load(file, null, true);
  }
}

// ---------------------------------------------------------------------------------------------
// The run.

async function main() {
  const [program, ...args] = process.argv.slice(2);
  if (!program) {
    process.stderr.write("usage: node virtual-peer.mjs server.js [ARGS]\n");
    realExit(2);
  }
  const file = path.resolve(program);
  patchEscapes();
  control.write({ zygote: process.pid, node: process.versions.node });
  const spawn = control.read();
  if (spawn.op !== "spawn") {
    control.write({ error: `the peer takes spawn first, not ${JSON.stringify(spawn.op)}` });
    realExit(2);
  }
  draw = rng(spawn.seed ?? 0);
  transport = spawn.transport ?? "stdio";
  role = spawn.role ?? "server";
  patchEntropy();
  installClock(Number(spawn.t ?? 0));
  if (role === "client") nothingKeepsAlive.track();
  patchListen();
  syncBuiltinESMExports();
  const stdin = installStdio();
  // A client's own stdin is empty.
  if (role === "client") stdin.push(null);
  process.argv = [process.argv[0], file, ...args];

  process.on("exit", (code) => {
    if (exited) return;
    exited = true;
    armed = false;
    report({ exit: code ?? process.exitCode ?? 0 });
  });

  // Nothing real keeps the loop alive while the program awaits a faked timer (its stdio is
  // in memory): without this, Node.js would find its loop empty and exit mid-run.
  const keepAlive = realSetInterval(() => {}, 2 ** 31 - 1);
  void keepAlive;
  armed = true;
  // Not awaited: a module's top-level await may wait for a timer, which only the driver
  // fires. A module that fails to load ends the process as it would under `node`.
  let loaded = false;
  loadProgram(file).then(
    () => {
      loaded = true;
    },
    (e) => {
      process.stderr.write(`${e?.stack ?? e}\n`);
      process.exit(1);
    },
  );
  await settle();
  for (;;) {
    // A client whose loop would be empty under `node` (no referenced timer, no server
    // process) ends as it would there: with its exit code, or 13 for a top-level await that
    // never settled. A server waits for its input, which only mcp-sim ends.
    if (role === "client" && !nothingKeepsAlive.hasWork()) process.exit(loaded ? (process.exitCode ?? 0) : 13);
    report();
    const cmd = control.read();
    if (cmd.op === "end") {
      exited = true;
      realExit(0);
    }
    // The timers due by T fire first, as Node's timers phase runs before its I/O; a seeded
    // tie order may put the input before those due at T exactly ("ties": "input").
    const t = Number(cmd.t ?? nowMs());
    if (cmd.ties === "input" && cmd.op !== "advance") await advanceBefore(t);
    else await advanceTo(t);
    // A seeded service time keeps the loop busy before the input is handled: the timers that
    // fall due meanwhile fire late, at its end, before the input (timers phase, then I/O).
    const costMs = Math.floor(Number(cmd.cost_us ?? 0) / 1000);
    if (costMs > 0 && cmd.op !== "advance") {
      clock.jump(costMs);
      await settle();
    }
    const child = VirtualChild.current;
    if (role !== "server" && cmd.conn !== undefined) {
      const socket = VirtualSocket.open.get(Number(cmd.conn));
      if (socket && cmd.op === "deliver") socket.push(Buffer.from(cmd.data, "utf8"));
      else if (socket && cmd.op === "close") socket.ended();
    } else if (role !== "server" && (cmd.op === "exit" || (cmd.op === "deliver" && cmd.child))) {
      // The server's output after the program let it go: nobody reads it.
      if (child && cmd.op === "deliver") child.stdout.push(Buffer.from(cmd.data, "utf8"));
      else if (child) child.exited(Number(cmd.code ?? 0), null);
    } else if (cmd.op === "deliver") stdin.push(Buffer.from(cmd.data, "utf8"));
    else if (cmd.op === "close") stdin.push(null);
    else if (cmd.op === "request") httpRequest(cmd);
    else if (cmd.op === "disconnect") httpDisconnect(Number(cmd.stream));
    await settle();
  }
}

main().catch((e) => {
  armed = true;
  process.stderr.write(`mcp-sim's Node.js shim failed: ${e?.stack ?? e}\n`);
  escape(`the shim failed: ${e?.stack ?? e}`, "shim");
  report({ fatal: true });
  realExit(3);
});
