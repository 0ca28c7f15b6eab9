// Installs the package as a user would, into empty projects outside the
// repository: from `npm pack`'s tarball, and from the folder with
// `npm install --install-links`. The tarball's project compiles README.md's
// example with the shipped tsconfig.base.json and runs it against a gateway
// on this Node and, when $SESSIONGATE_NODE22 names a Node 22 binary (CI
// installs one), on Node 22 too. Needs the npm registry (for the package's
// dependencies and typescript).

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { promisify } from "node:util";

import { GatewayProcess, REPO } from "./gateway.js";

const run = promisify(execFile);
const PKG = join(REPO, "clients", "typescript");
const gwp = new GatewayProcess();
const tmp = mkdtempSync(join(tmpdir(), "sessiongate-install-"));
before(() => gwp.start());
after(async () => {
  await gwp.stop();
  rmSync(tmp, { recursive: true, force: true });
});

/** The environment of a nested npm: without the npm_* variables of the `npm test` running us. */
function npmEnv(): NodeJS.ProcessEnv {
  const keep = new Set(["npm_config_registry", "npm_config_cache", "npm_config_userconfig"]);
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("npm_") || keep.has(k)));
}

async function npm(cwd: string, ...args: string[]): Promise<string> {
  const { stdout } = await run("npm", [...args, "--no-audit", "--no-fund"], { cwd, env: npmEnv(), timeout: 300_000 });
  return stdout;
}

function emptyProject(name: string): string {
  const dir = join(tmp, name);
  mkdirSync(dir);
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name, private: true, type: "module" }));
  return dir;
}

it("installs from npm pack's tarball and runs the README example", { timeout: 600_000 }, async () => {
  const packed = await npm(PKG, "pack", "--json", "--pack-destination", tmp);
  const [{ filename, files }] = JSON.parse(packed) as [{ filename: string; files: { path: string }[] }];
  const paths = files.map((f) => f.path);
  for (const want of ["dist/index.js", "dist/index.d.ts", "tsconfig.base.json", "README.md", "package.json"]) {
    assert.ok(paths.includes(want), `the tarball lacks ${want}: ${paths.join(" ")}`);
  }
  const dir = emptyProject("from-tarball");
  await npm(dir, "install", join(tmp, filename), "typescript@5.9.3", "@types/node@20.19.43");

  const readme = readFileSync(join(PKG, "README.md"), "utf8");
  const m = /<!-- typescript-example:begin -->\s*```ts\n([\s\S]*?)```\s*<!-- typescript-example:end -->/.exec(readme);
  assert.ok(m, "clients/typescript/README.md has no typescript-example block");
  writeFileSync(join(dir, "example.ts"), m[1].replaceAll("127.0.0.1:50051", gwp.addr));
  writeFileSync(
    join(dir, "tsconfig.json"),
    JSON.stringify({ extends: "@sessiongate/client/tsconfig.base.json", compilerOptions: { outDir: "out" }, include: ["example.ts"] }),
  );
  await run(process.execPath, [join(dir, "node_modules", "typescript", "bin", "tsc"), "-p", dir], { cwd: dir, timeout: 120_000 });

  const nodes = [process.execPath, ...(process.env.SESSIONGATE_NODE22 ? [process.env.SESSIONGATE_NODE22] : [])];
  if (process.env.CI && !process.env.SESSIONGATE_NODE22) assert.fail("CI must set SESSIONGATE_NODE22 (see .ci/run)");
  for (const node of nodes) {
    const { stdout: version } = await run(node, ["--version"]);
    const { stdout } = await run(node, [join(dir, "out", "example.js")], { cwd: dir, timeout: 60_000 });
    assert.match(stdout, /\{ hello: 'world', n: 3 \}/, `on ${version}`);
    assert.match(stdout, /result \{ count: 3 \}/, `on ${version}`);
    assert.match(stdout, /"status":"live"/, `on ${version}: JSON.stringify of a status`);
    assert.match(stdout, /timed out/, `on ${version}`);
  }
});

it("installs from the folder with npm install --install-links", { timeout: 600_000 }, async () => {
  const dir = emptyProject("from-folder");
  await npm(dir, "install", "--install-links", PKG);
  writeFileSync(
    join(dir, "check.js"),
    `import { Gateway } from "@sessiongate/client";
const gw = new Gateway(${JSON.stringify(gwp.addr)});
const s = await gw.openSession({ clientName: "from-folder" }, { timeoutMs: 10000 });
console.log(JSON.stringify((await s.run("echo", { ok: 1 }, { timeoutMs: 10000 })).result));
await s.close();
gw.close();
`,
  );
  const { stdout } = await run(process.execPath, [join(dir, "check.js")], { cwd: dir, timeout: 60_000 });
  assert.equal(stdout.trim(), '{"ok":1}');
});
