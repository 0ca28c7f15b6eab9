// The TypeScript client against a real gateway binary (see gateway.ts).
// Run: npm test (in clients/typescript).

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import * as grpc from "@grpc/grpc-js";

import {
  DeadlineExceededError,
  Gateway,
  GatewayError,
  InvalidArgumentError,
  NotFoundError,
  retryServiceConfig,
  SESSION_METADATA_KEY,
  TIMEOUT_METADATA_KEY,
  TimeoutExceededError,
  toValue,
  fromRawOrValue,
  type Session,
  type WatchItem,
} from "../src/index.js";
import { GatewayProcess } from "./gateway.js";

const gwp = new GatewayProcess();
let gw: Gateway;
const sessions: Session[] = [];

before(async () => {
  await gwp.start();
  gw = new Gateway(gwp.addr);
});

after(async () => {
  for (const s of sessions) await s.close("test done", { timeoutMs: 10_000 });
  gw?.close();
  await gwp.stop();
});

async function open(): Promise<Session> {
  const s = await gw.openSession({ clientName: "ts-test" }, { timeoutMs: 10_000 });
  sessions.push(s);
  return s;
}

async function collect(it: AsyncIterable<WatchItem>): Promise<WatchItem[]> {
  const out: WatchItem[] = [];
  for await (const x of it) out.push(x);
  return out;
}

describe("sessiongate client", { timeout: 60_000 }, () => {
  it("opens a session", async () => {
    const s = await open();
    assert.match(s.id, /^s1\./);
    assert.ok("echo" in s.agents);
    assert.equal(s.runtime, "default");
    const list = await gw.listSessions({ timeoutMs: 10_000 });
    assert.ok(list.some((i) => i.sessionId === s.id && i.phase === "ready" && i.openedAt instanceof Date));
  });

  it("runs echo with nested input and exact numbers", async () => {
    const s = await open();
    const value = {
      hello: "world",
      ints: [0, 3, -7, 2 ** 53, -(2 ** 53), Number.MAX_SAFE_INTEGER],
      floats: [1.5, -0.25, 1e300],
      nested: { list: [null, true, false, { deep: [1, [2, [3]]] }], empty: {}, none: [] },
      unicode: "héllo ✓",
    };
    const r = await s.run("echo", value, { timeoutMs: 10_000 });
    assert.deepEqual(r.result, value);
    assert.ok(r.jobId);
    assert.equal((await s.run("echo", 42, { timeoutMs: 10_000 })).result, 42);
    assert.equal((await s.run("echo", undefined, { timeoutMs: 10_000 })).result, null);
    // Undefined properties are left out, as JSON.stringify does.
    assert.deepEqual((await s.run("echo", { a: 1, b: undefined }, { timeoutMs: 10_000 })).result, { a: 1 });
  });

  it("converts plain objects to google.protobuf.Value, and refuses what is not JSON", () => {
    const v = toValue({ a: [1, "x", null, true] });
    assert.equal(v.kind.case, "structValue");
    const a = v.kind.case === "structValue" ? v.kind.value.fields["a"] : undefined;
    assert.equal(a?.kind.case, "listValue");
    assert.throws(() => toValue(10n), TypeError);
    assert.throws(() => toValue({ x: NaN }), /input\.x/);
    assert.throws(() => toValue([() => 1]), TypeError);
  });

  it("parses raw JSON sent in place of a Value", () => {
    const raw = new TextEncoder().encode('{"n": 12345678901234567890, "s": "x"}');
    assert.deepEqual(fromRawOrValue(raw, undefined), { n: 12345678901234567890, s: "x" });
    assert.deepEqual(fromRawOrValue(new Uint8Array(), toValue({ a: 1 })), { a: 1 });
  });

  it("watches a stream job as an async iterator", async () => {
    const s = await open();
    await s.run("echo", "before", { timeoutMs: 10_000 }); // events before the job
    const job = await s.submit("stream", { count: 5, interval_ms: 20 }, { timeoutMs: 10_000 });
    assert.ok(job.acceptedAt instanceof Date);
    const items = await collect(s.watch(job, { timeoutMs: 30_000 }));
    // watch(job) starts after job.afterEventSeq: above the earlier job's
    // events, below this one's first; from 0 the same items.
    assert.ok(job.afterEventSeq > 0 && job.afterEventSeq < items[0].eventSeq, `afterEventSeq ${job.afterEventSeq}`);
    assert.deepEqual(
      (await collect(s.watch(job.jobId, { timeoutMs: 30_000 }))).map((i) => i.eventSeq),
      items.map((i) => i.eventSeq),
    );
    const events = items.slice(0, -1);
    const last = items.at(-1);
    assert.equal(events.length, 5);
    assert.deepEqual(
      events.map((e) => (e.type === "event" ? [e.kind, (e.body as { i: number }).i] : e.type)),
      [0, 1, 2, 3, 4].map((i) => ["log", i]),
    );
    for (let i = 1; i < items.length; i++) assert.ok(items[i].eventSeq > items[i - 1].eventSeq);
    assert.equal(typeof items[0].eventSeq, "number");
    assert.deepEqual(last, {
      type: "result",
      eventSeq: last!.eventSeq,
      result: { count: 5 },
      summary: "",
      resultId: "",
      resultSize: 0,
      extensions: {},
    });
    // From a sequence number: only what follows.
    const replay = await collect(s.watch(job.jobId, { fromEventSeq: events[2].eventSeq, timeoutMs: 30_000 }));
    assert.deepEqual(
      replay.map((i) => i.eventSeq),
      items.slice(3).map((i) => i.eventSeq),
    );
    // Leaving the loop early ends the stream.
    for await (const it of s.watch(job, { timeoutMs: 30_000 })) {
      assert.equal(it.type, "event");
      break;
    }
  });

  it("cancels a job", async () => {
    const s = await open();
    const job = await s.submit("sleep", { ms: 30_000 }, { timeoutMs: 10_000 });
    await s.cancel(job, "test", { timeoutMs: 10_000 });
    const items = await collect(s.watch(job, { timeoutMs: 30_000 }));
    const last = items.at(-1);
    assert.equal(last?.type, "error");
    if (last?.type === "error") {
      assert.equal(last.finalStatus, "cancelled");
      assert.equal(last.code, "CANCELLED");
    }
  });

  it("aborts a call with an AbortSignal", async () => {
    const s = await open();
    const ac = new AbortController();
    const p = s.run("sleep", { ms: 30_000 }, { signal: ac.signal });
    setImmediate(() => ac.abort());
    await assert.rejects(p, { name: "AbortError" });
  });

  it("probes status: live, then not_found after close", async () => {
    const s = await gw.openSession({ clientName: "ts-status" }, { timeoutMs: 10_000 });
    const live = await s.status({ timeoutMs: 5_000 });
    assert.equal(live.status, "live");
    assert.equal(live.phase, "ready");
    assert.equal(typeof live.generation, "number");
    assert.ok(live.generation >= 1);
    await s.close("", { timeoutMs: 10_000 });
    await s.close("", { timeoutMs: 10_000 }); // idempotent
    const gone = await gw.status(s.id, { timeoutMs: 5_000 });
    assert.equal(gone.status, "not_found");
    await assert.rejects(s.run("echo", 1, { timeoutMs: 5_000 }), (e: unknown) => {
      assert.ok(e instanceof NotFoundError);
      assert.equal(e.reason, "SESSION_NOT_FOUND");
      return true;
    });
  });

  it("surfaces timeout details asked for with x-timeout-ms", async () => {
    // A 1 s server budget (tool_call's minimum) under a 10 s deadline.
    const s = await open();
    const start = Date.now();
    await assert.rejects(s.run("sleep", { ms: 5_000 }, { timeoutMs: 10_000, serverTimeoutMs: 1_000 }), (e: unknown) => {
      assert.ok(e instanceof TimeoutExceededError, String(e));
      assert.ok(e instanceof DeadlineExceededError);
      assert.equal(e.code, grpc.status.DEADLINE_EXCEEDED);
      assert.equal(e.profile, "tool_call");
      assert.equal(e.configuredMs, 1000);
      assert.ok(e.elapsedMs >= 1000);
      assert.equal(e.limit, "unary");
      assert.equal(e.service, "sessiongate.v1.SessionGateway");
      assert.equal(e.method, "RunJob");
      assert.equal(e.domain, "timeoutprofile");
      assert.equal(e.reason, "TIMEOUT_PROFILE_EXCEEDED");
      return true;
    });
    assert.ok(Date.now() - start < 5_000);
  });

  it("surfaces timeout details when the caller's own deadline is the budget", async () => {
    // Retries off: the published policy retries DEADLINE_EXCEEDED, and a
    // retry after the gateway's answer turns it into a bare deadline. Five
    // calls, of which one may lose the race on a loaded machine.
    using g = new Gateway(gwp.addr, { retry: false });
    await using s = await g.openSession({ clientName: "ts-deadline" }, { timeoutMs: 10_000 });
    const outcomes: unknown[] = [];
    for (let i = 0; i < 5; i++) {
      await s.run("sleep", { ms: 5_000 }, { timeoutMs: 300 }).then(
        () => assert.fail("the call succeeded"),
        (e: unknown) => outcomes.push(e),
      );
    }
    for (const e of outcomes) assert.ok(e instanceof DeadlineExceededError, String(e));
    const details = outcomes.filter((e): e is TimeoutExceededError => e instanceof TimeoutExceededError);
    assert.ok(details.length >= 4, outcomes.map(String).join("; "));
    for (const e of details) {
      assert.equal(e.profile, "tool_call");
      assert.equal(e.limit, "caller_deadline");
      assert.ok(e.elapsedMs <= 300);
    }
  });

  it("surfaces bad input as a typed error", async () => {
    await assert.rejects(gw.session("").run("echo", { x: 1 }, { timeoutMs: 5_000 }), (e: unknown) => {
      assert.ok(e instanceof InvalidArgumentError);
      assert.equal(e.codeName, "INVALID_ARGUMENT");
      assert.equal(e.domain, "sessiongate");
      assert.equal(e.reason, "INVALID_ARGUMENT");
      return true;
    });
    const s = await open();
    await assert.rejects(s.run("no-such-agent", 1, { timeoutMs: 5_000 }), NotFoundError);
    await assert.rejects(s.run("fail", { code: "INVALID_REQUEST", message: "nope" }, { timeoutMs: 5_000 }), (e: unknown) => {
      assert.ok(e instanceof InvalidArgumentError);
      assert.equal(e.domain, "arcp");
      assert.equal(e.retryable, false);
      return true;
    });
    await assert.rejects(s.run("echo", 1, { timeoutMs: -1 }), RangeError);
  });

  it("sends the session and timeout metadata", async () => {
    const seen: [string, grpc.Metadata][] = [];
    const recorder: grpc.Interceptor = (options, next) =>
      new grpc.InterceptingCall(next(options), {
        start(metadata, listener, nxt) {
          seen.push([options.method_definition.path, metadata.clone()]);
          nxt(metadata, listener);
        },
      });
    using g = new Gateway(gwp.addr, { interceptors: [recorder] });
    {
      await using s = await g.openSession({ clientName: "ts-md" });
      await s.run("echo", 1, { timeoutMs: 2_500 });
      const job = await s.submit("stream", { count: 1, interval_ms: 1 });
      await collect(s.watch(job));
      await s.status();
      const byMethod = new Map(seen.map(([p, md]) => [p.split("/").at(-1)!, md]));
      assert.deepEqual([...byMethod.keys()].sort(), ["GetSessionStatus", "OpenSession", "RunJob", "SubmitJob", "WatchJob"]);
      for (const [m, md] of byMethod) {
        assert.deepEqual(md.get(SESSION_METADATA_KEY), m === "OpenSession" ? [] : [s.id], m);
      }
      assert.deepEqual(byMethod.get("RunJob")!.get(TIMEOUT_METADATA_KEY), ["2500"]);
      assert.deepEqual(byMethod.get("SubmitJob")!.get(TIMEOUT_METADATA_KEY), []);
    }
    // `await using` closed the session.
    assert.equal(seen.at(-1)![0], "/sessiongate.v1.SessionGateway/CloseSession");
  });

  it("carries the published retry policy", () => {
    const policy = retryServiceConfig.methodConfig[0].retryPolicy;
    assert.deepEqual([...policy.retryableStatusCodes].sort(), ["DEADLINE_EXCEEDED", "UNAVAILABLE"]);
    assert.ok(retryServiceConfig.retryThrottling.maxTokens > 0);
  });

  it("is a GatewayError hierarchy", () => {
    const e = new TimeoutExceededError("x", {
      profileName: "p",
      configuredTimeoutMs: 1,
      elapsedMs: 2,
      service: "s",
      method: "m",
      limit: "unary",
    } as never);
    assert.ok(e instanceof GatewayError && e instanceof Error);
    assert.equal(e.name, "TimeoutExceededError");
    assert.equal(e.codeName, "DEADLINE_EXCEEDED");
  });
});
