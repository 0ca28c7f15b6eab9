// Installs the package as a user would, into empty projects outside the
// repository: from `npm pack`'s tarball, and with a plain `npm install
// <folder>` of a copy of the package folder as a fresh clone has it (no
// node_modules). Each project compiles README.md's example with the shipped
// tsconfig.base.json and runs it against a gateway on this Node and, when
// $SESSIONGATE_NODE22 names a Node 22 binary (CI installs one), on Node 22
// too. Needs the npm registry (for the package's dependencies and
// typescript).

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { cpSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
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

/**
 * Compiles README.md's example in dir (where @sessiongate/client, typescript
 * and @types/node are installed) with a tsconfig that extends the package's
 * tsconfig.base.json, and runs it against the test gateway on each Node.
 */
async function runReadmeExample(dir: string): Promise<void> {
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
}

it("installs from npm pack's tarball and runs the README example", { timeout: 600_000 }, async () => {
  const packed = await npm(PKG, "pack", "--json", "--pack-destination", tmp);
  const [{ filename, files }] = JSON.parse(packed) as [{ filename: string; files: { path: string }[] }];
  const paths = files.map((f) => f.path);
  for (const want of ["dist/index.js", "dist/index.d.ts", "scripts/install-deps.mjs", "tsconfig.base.json", "README.md", "package.json"]) {
    assert.ok(paths.includes(want), `the tarball lacks ${want}: ${paths.join(" ")}`);
  }
  const dir = emptyProject("from-tarball");
  await npm(dir, "install", join(tmp, filename), "typescript@5.9.3", "@types/node@20.19.43");
  // The dependencies are the project's; the install script found them and left the package alone.
  assert.ok(existsSync(join(dir, "node_modules", "@bufbuild", "protobuf", "package.json")));
  assert.ok(!existsSync(join(dir, "node_modules", "@sessiongate", "client", "node_modules")), "the install script installed into a tarball install");
  await runReadmeExample(dir);
});

// `npm install <folder>` of a folder outside the project makes a symlink and
// installs none of the folder's dependencies; Node resolves the package's
// imports from the folder's real path. The package's install script
// (scripts/install-deps.mjs) installs them there. Without it the example
// fails with "Cannot find package '@bufbuild/protobuf'".
it("installs from a fresh clone's folder with a plain npm install and runs the README example", { timeout: 600_000 }, async () => {
  // The package folder as a clone has it: no node_modules, no build output of the tests.
  const clone = join(tmp, "clone", "clients", "typescript");
  const skip = new Set(["node_modules", "dist-test", ".tmp"]);
  cpSync(PKG, clone, { recursive: true, filter: (src) => !skip.has(basename(src)) });
  assert.ok(!existsSync(join(clone, "node_modules")));

  const dir = emptyProject("from-folder");
  await npm(dir, "install", clone, "typescript@5.9.3", "@types/node@20.19.43");
  const link = join(dir, "node_modules", "@sessiongate", "client");
  assert.ok(lstatSync(link).isSymbolicLink(), "npm copied the folder instead of linking it: this test no longer covers the link");
  assert.equal(realpathSync(link), realpathSync(clone));
  assert.ok(existsSync(join(clone, "node_modules", "@bufbuild", "protobuf", "package.json")), "the linked folder's dependencies were not installed");
  assert.ok(!existsSync(join(clone, "node_modules", "typescript")), "the install script installed devDependencies");
  await runReadmeExample(dir);
});
