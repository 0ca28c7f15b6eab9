// The input nesting bound of the TypeScript client against a real gateway: an
// input nested MAX_INPUT_DEPTH deep runs and comes back intact; a deeper one —
// one level, or thousands — is refused before it is sent with the gateway's
// INVALID_ARGUMENT VALUE_TOO_DEEP naming the path.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { MAX_INPUT_DEPTH } from "../src/depth.js";
import { Gateway, InvalidArgumentError, type WatchItem } from "../src/index.js";
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

  it("delivers a runtime result deeper than the bound, sent as raw JSON", async () => {
    // The reference runtime's nest agent answers 1 inside depth arrays or
    // {"a": …} objects: past the gateway's bound (32) it arrives as
    // raw_result JSON, one level past it (objects) already more than a
    // Value grpcio could decode, 3000 far more than protobuf-es's 100.
    using gw = new Gateway(gwp.addr);
    await using s = await gw.openSession({ clientName: "ts-deep" }, { timeoutMs: 10_000 });
    // [depth, "array" | "object"] of 1 inside one-element arrays or {a: …}
    // objects, walked without recursion (assert.deepEqual recurses).
    const nesting = (v: unknown): [number, string] | undefined => {
      let depth = 0;
      let kind: string | undefined;
      while (typeof v === "object" && v !== null) {
        const k = Array.isArray(v) ? "array" : "object";
        const keys = Object.keys(v);
        if ((kind ?? k) !== k || keys.length !== 1 || keys[0] !== (k === "array" ? "0" : "a")) return undefined;
        kind = k;
        v = Array.isArray(v) ? v[0] : (v as { a: unknown }).a;
        depth++;
      }
      return v === 1 && kind ? [depth, kind] : undefined;
    };
    for (const [depth, as] of [
      [32, "object"],
      [33, "object"],
      [3000, "array"],
    ] as const) {
      const want = [depth, as];
      const r = await s.run("nest", { depth, as }, { timeoutMs: 30_000 });
      assert.deepEqual(nesting(r.result), want, `run nest ${depth} ${as}`);
      const job = await s.submit("nest", { depth, as }, { timeoutMs: 30_000 });
      let last: WatchItem | undefined;
      for await (const it of s.watch(job, { timeoutMs: 30_000 })) last = it;
      assert.equal(last?.type, "result", `watch nest ${depth} ${as}`);
      assert.deepEqual(nesting(last.type === "result" ? last.result : undefined), want, `watch nest ${depth} ${as}`);
    }
  });
});
