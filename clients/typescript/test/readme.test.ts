// Runs clients/typescript/README.md's example block verbatim, type-checked
// against this package (imported by its name, "@sessiongate/client", as a
// user would), with the test gateway's address in place of 127.0.0.1:50051.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { promisify } from "node:util";

import ts from "typescript";

import { GatewayProcess, REPO } from "./gateway.js";

const gwp = new GatewayProcess();
before(() => gwp.start());
after(() => gwp.stop());

it("runs the README's TypeScript example", { timeout: 120_000 }, async () => {
  const readme = readFileSync(join(REPO, "clients", "typescript", "README.md"), "utf8");
  const m = /<!-- typescript-example:begin -->\s*```ts\n([\s\S]*?)```\s*<!-- typescript-example:end -->/.exec(readme);
  assert.ok(m, "clients/typescript/README.md has no typescript-example block");
  const code = m[1].replaceAll("127.0.0.1:50051", gwp.addr);

  // Inside the package directory, so that "@sessiongate/client" resolves to
  // this package (self-reference through package.json "exports").
  const dir = join(REPO, "clients", "typescript", ".tmp", `readme-${process.pid}`);
  mkdirSync(dir, { recursive: true });
  try {
    const src = join(dir, "example.ts");
    writeFileSync(src, code);
    const program = ts.createProgram([src], {
      target: ts.ScriptTarget.ES2022,
      lib: ["lib.es2022.d.ts", "lib.esnext.disposable.d.ts"],
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      strict: true,
      types: ["node"],
      skipLibCheck: true,
      rootDir: dir,
      outDir: dir,
    });
    const diags = [...ts.getPreEmitDiagnostics(program), ...program.emit().diagnostics];
    assert.deepEqual(
      diags.map((d) => ts.flattenDiagnosticMessageText(d.messageText, "\n")),
      [],
      "the README example does not type-check",
    );
    const { stdout } = await promisify(execFile)(process.execPath, [join(dir, "example.js")], { timeout: 60_000 });
    assert.match(stdout, /\{ hello: 'world', n: 3 \}/);
    assert.match(stdout, /result \{ count: 3 \}/);
    assert.match(stdout, /timed out/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
