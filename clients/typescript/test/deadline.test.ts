// The call's own deadline (src/deadline.ts) against a real gateway binary:
// an answer that arrived before the deadline is delivered even when the
// event loop was stalled past it.
// Run: npm test (in clients/typescript).

import assert from "node:assert/strict";
import { createServer, type AddressInfo, type Socket } from "node:net";
import { after, before, describe, it } from "node:test";

import * as grpc from "@grpc/grpc-js";

import { DeadlineExceededError, Gateway, TimeoutExceededError } from "../src/index.js";
import { grpcTimeout } from "../src/deadline.js";
import { GatewayProcess } from "./gateway.js";

const gwp = new GatewayProcess();

before(async () => {
  await gwp.start();
});

after(async () => {
  await gwp.stop();
});

/** Blocks the event loop until Date.now() reaches until (a stalled process). */
function stallUntil(until: number): void {
  while (Date.now() < until) {
    // busy: nothing else of this process runs
  }
}

describe("own deadline", { timeout: 60_000 }, () => {
  it("formats grpc-timeout as grpc-js does (at most 8 digits, rounded up)", () => {
    assert.equal(grpcTimeout(150), "150m");
    assert.equal(grpcTimeout(0.2), "1m");
    assert.equal(grpcTimeout(99_999_999), "99999999m");
    assert.equal(grpcTimeout(100_000_000), "100000S");
    assert.equal(grpcTimeout(100_000_001), "100001S");
  });

  it("delivers the timeout details after the event loop stalled past the deadline", async () => {
    // The gateway ends a 300 ms own-deadline call 100 ms early, with the
    // details. Here the process stalls from 50 ms to 700 ms, in the check
    // phase, so that when it runs again the deadline's timer is due and the
    // answer is waiting in the socket. With grpc-js keeping the deadline, the
    // next timers phase cancels the call before the poll phase reads the
    // answer: a bare DEADLINE_EXCEEDED. The client must deliver the details.
    // (The gateway itself may stall past its margin on a loaded machine:
    // two of three calls must get the details; grpc-js's timer gets none.)
    using g = new Gateway(gwp.addr, { retry: false });
    await using s = await g.openSession({ clientName: "ts-stall" }, { timeoutMs: 10_000 });
    const outcomes: unknown[] = [];
    for (let i = 0; i < 3; i++) {
      const start = Date.now();
      const call = s.run("sleep", { ms: 5_000 }, { timeoutMs: 300 });
      setTimeout(() => setImmediate(() => stallUntil(start + 700)), 50);
      outcomes.push(await call.then(() => assert.fail("the call succeeded"), (e: unknown) => e));
      assert.ok(Date.now() - start >= 700, "the stall did not happen");
    }
    for (const e of outcomes) assert.ok(e instanceof DeadlineExceededError, String(e));
    const details = outcomes.filter((e): e is TimeoutExceededError => e instanceof TimeoutExceededError);
    assert.ok(details.length >= 2, outcomes.map(String).join("; "));
    for (const e of details) {
      assert.equal(e.limit, "caller_deadline");
      assert.ok(e.elapsedMs <= 300, String(e.elapsedMs));
    }
  });

  it("counts the deadline from when the request leaves", async () => {
    // The process stalls for 250 ms right after making the call, before the
    // request is written. The gateway counts the 300 ms from the request's
    // arrival and answers 100 ms before that ends, i.e. about 450 ms after
    // the call was made. A timer counted from the call (grpc-js's) runs at
    // 300 ms, before the answer exists: a bare DEADLINE_EXCEEDED.
    // Two of three calls must get the details, as above.
    using g = new Gateway(gwp.addr, { retry: false });
    await using s = await g.openSession({ clientName: "ts-late" }, { timeoutMs: 10_000 });
    const outcomes: unknown[] = [];
    for (let i = 0; i < 3; i++) {
      const start = Date.now();
      const call = s.run("sleep", { ms: 5_000 }, { timeoutMs: 300 });
      // s.run reaches the gRPC call after a few microtasks: stall after them.
      await Promise.resolve();
      await Promise.resolve();
      stallUntil(start + 250);
      outcomes.push(await call.then(() => assert.fail("the call succeeded"), (e: unknown) => e));
    }
    const details = outcomes.filter((e): e is TimeoutExceededError => e instanceof TimeoutExceededError);
    assert.ok(details.length >= 2, outcomes.map(String).join("; "));
    for (const e of details) assert.equal(e.limit, "caller_deadline");
  });

  it("sends each attempt the time left (grpc-timeout), retries included", async () => {
    // (grpc-js's server reads grpc-timeout into the call's deadline.)
    // A peer that answers the first attempt UNAVAILABLE after 300 ms (the
    // published retry policy retries it) and the second with an empty
    // RunJobResponse. The first attempt carries the whole 2 s; the second
    // what is left after 300 ms and the retry's backoff, not 2 s again.
    const seen: number[] = []; // the deadline each attempt brought, in ms from its arrival
    const srv = new grpc.Server();
    srv.register(
      "/sessiongate.v1.SessionGateway/RunJob",
      (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        const d = call.getDeadline();
        seen.push((d instanceof Date ? d.getTime() : Number(d)) - Date.now());
        if (seen.length === 1) setTimeout(() => cb({ code: grpc.status.UNAVAILABLE, details: "try again" }), 300);
        else cb(null, Buffer.alloc(0));
      },
      (b: Buffer) => b,
      (b: Buffer) => b,
      "unary",
    );
    const port = await new Promise<number>((res, rej) =>
      srv.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? rej(err) : res(p))),
    );
    try {
      using g = new Gateway(`127.0.0.1:${port}`);
      await g.session("s1.x").run("echo", 1, { timeoutMs: 2_000 });
      assert.equal(seen.length, 2, `attempts: ${seen.join(", ")}`);
      assert.ok(seen[0] > 1_800 && seen[0] <= 2_000, `first attempt: ${seen[0]} ms`);
      assert.ok(seen[1] < seen[0] - 250, `the retry brought ${seen[1]} ms after the first attempt's ${seen[0]} ms`);
    } finally {
      srv.forceShutdown();
    }
  });

  it("ends a call at its own deadline when no answer comes", async () => {
    // A peer that accepts connections and never speaks: nothing will arrive,
    // and without a grpc-js deadline only the client's own timer ends the call.
    const silent = createServer(() => {});
    const conns: Socket[] = [];
    silent.on("connection", (c) => conns.push(c));
    await new Promise<void>((res) => silent.listen(0, "127.0.0.1", res));
    try {
      using g = new Gateway(`127.0.0.1:${(silent.address() as AddressInfo).port}`, { retry: false });
      for (const timeoutMs of [50, 200]) {
        const start = Date.now();
        await assert.rejects(g.session("s1.x").run("echo", 1, { timeoutMs }), (e: unknown) => {
          assert.ok(e instanceof DeadlineExceededError, String(e));
          assert.ok(!(e instanceof TimeoutExceededError));
          assert.equal(e.grpcCode, e.code);
          return true;
        });
        const took = Date.now() - start;
        assert.ok(took >= timeoutMs - 5 && took < timeoutMs + 2_000, `a ${timeoutMs} ms call took ${took} ms`);
      }
    } finally {
      for (const c of conns) c.destroy();
      await new Promise((res) => silent.close(res));
    }
  });
});
