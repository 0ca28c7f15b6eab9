// Message size limits of the TypeScript client against a real gateway: a
// 7 MB result reaches it (grpc-js's default 4 MiB receive limit lost it after
// the job ran), and a 10 MB input gets RESOURCE_EXHAUSTED CAP_EXCEEDED naming
// max_input_bytes.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { status as Code } from "@grpc/grpc-js";

import { Gateway, GatewayError } from "../src/index.js";
import { GatewayProcess } from "./gateway.js";

const gwp = new GatewayProcess();

before(async () => {
  await gwp.start();
});

after(async () => {
  await gwp.stop();
});

describe("limits", () => {
  it("a 7 MB result arrives; a 10 MB input is CAP_EXCEEDED max_input_bytes", async () => {
    using gw = new Gateway(gwp.addr);
    await using s = await gw.openSession({ clientName: "ts-limits" }, { timeoutMs: 10_000 });
    const n = 7_000_000;
    const r = await s.run("echo", "r".repeat(n), { timeoutMs: 60_000 });
    assert.equal((r.result as string).length, n);
    await assert.rejects(
      s.run("echo", "i".repeat(10_000_000), { timeoutMs: 60_000 }),
      (e: unknown) =>
        e instanceof GatewayError &&
        e.grpcCode === Code.RESOURCE_EXHAUSTED &&
        e.reason === "CAP_EXCEEDED" &&
        e.metadata.cap === "max_input_bytes",
    );
  });
});
