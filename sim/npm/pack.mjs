// Makes the npm tarballs from a built binary: the main package `mcp-sim` (the launcher and
// the API) and the package of this platform (`@mcp-sim/<platform>-<arch>`, the binary), both
// at the main package's version.
//
//   node sim/npm/pack.mjs path/to/mcp-sim OUTDIR
//
// Prints the two tarballs' paths, the main one first.
import { execFileSync } from "node:child_process";
import { chmodSync, copyFileSync, cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const [binary, outArg] = process.argv.slice(2);
if (!binary || !outArg) {
  console.error("usage: node pack.mjs BINARY OUTDIR");
  process.exit(2);
}
const here = dirname(fileURLToPath(import.meta.url));
const out = resolve(outArg);
const main = JSON.parse(readFileSync(join(here, "mcp-sim", "package.json"), "utf8"));
const key = `${process.platform}-${process.arch}`;
const name = `@mcp-sim/${key}`;
if (!(name in main.optionalDependencies)) {
  console.error(`mcp-sim names no package for ${key} in its optionalDependencies`);
  process.exit(2);
}
rmSync(out, { recursive: true, force: true });
const platformDir = join(out, "src", key);
mkdirSync(join(platformDir, "bin"), { recursive: true });
const exe = process.platform === "win32" ? "mcp-sim.exe" : "mcp-sim";
copyFileSync(binary, join(platformDir, "bin", exe));
chmodSync(join(platformDir, "bin", exe), 0o755);
writeFileSync(
  join(platformDir, "package.json"),
  JSON.stringify(
    {
      name,
      version: main.version,
      description: `The mcp-sim binary for ${key}`,
      license: main.license,
      os: [process.platform],
      cpu: [process.arch],
      files: [`bin/${exe}`],
      preferUnplugged: true,
    },
    null,
    2,
  ) + "\n",
);
const mainDir = join(out, "src", "mcp-sim");
cpSync(join(here, "mcp-sim"), mainDir, { recursive: true });
const pack = (dir) =>
  execFileSync("npm", ["pack", "--silent", "--pack-destination", out], { cwd: dir, encoding: "utf8" })
    .trim()
    .split("\n")
    .pop();
const tarballs = [pack(mainDir), pack(platformDir)].map((t) => join(out, t));
console.log(tarballs.join("\n"));
