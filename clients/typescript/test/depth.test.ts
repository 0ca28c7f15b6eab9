// The input nesting bound of the TypeScript client against a real gateway: an
// input nested MAX_INPUT_DEPTH deep runs and comes back intact; a deeper one —
// one level, or thousands — is refused before it is sent with the gateway's
// INVALID_ARGUMENT VALUE_TOO_DEEP naming the path.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { MAX_INPUT_DEPTH } from "../src/depth.js";
import { Gateway, InvalidArgumentError } from "../src/index.js";
import { GatewayProcess } from "./gateway.js";

const gwp = new GatewayProcess();

before(async () => {
  await gwp.start();
});

after(async () => {
  await gwp.stop();
});

function nested(d: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < d; i++) v = [v];
  return v;
}

describe("depth", () => {
  it("refuses inputs deeper than MAX_INPUT_DEPTH, naming the path", async () => {
    using gw = new Gateway(gwp.addr);
    await using s = await gw.openSession({ clientName: "ts-depth" }, { timeoutMs: 10_000 });
    const r = await s.run("echo", nested(MAX_INPUT_DEPTH), { timeoutMs: 30_000 });
    assert.deepEqual(r.result, nested(MAX_INPUT_DEPTH));
    for (const d of [MAX_INPUT_DEPTH + 1, 5000]) {
      await assert.rejects(
        s.run("echo", nested(d), { timeoutMs: 30_000 }),
        (e: unknown) =>
          e instanceof InvalidArgumentError &&
          e.reason === "VALUE_TOO_DEEP" &&
          e.metadata.field === "input" + "[0]".repeat(MAX_INPUT_DEPTH),
      );
      await assert.rejects(
        s.submit("echo", { a: nested(d) }, { timeoutMs: 30_000 }),
        (e: unknown) => e instanceof InvalidArgumentError && e.reason === "VALUE_TOO_DEEP",
      );
    }
  });
});
