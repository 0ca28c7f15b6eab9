// The ARCP job surface of the TypeScript client against a real gateway
// binary: agent versions, leases, extensions, trace context, typed events,
// listJobs and subscribe.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import * as grpc from "@grpc/grpc-js";

import {
  Gateway,
  InvalidArgumentError,
  isTraceparent,
  NotFoundError,
  PermissionDeniedError,
  TRACEPARENT_METADATA_KEY,
  type Session,
  type WatchItem,
} from "../src/index.js";
import { GatewayProcess } from "./gateway.js";

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const TRACEPARENT = `00-${TRACE_ID}-00f067aa0ba902b7-01`;

const gwp = new GatewayProcess();
const seen: [string, grpc.Metadata][] = [];
const recorder: grpc.Interceptor = (options, next) =>
  new grpc.InterceptingCall(next(options), {
    start(metadata, listener, nxt) {
      seen.push([options.method_definition.path.split("/").at(-1)!, metadata.clone()]);
      nxt(metadata, listener);
    },
  });
let gw: Gateway;
const sessions: Session[] = [];

before(async () => {
  await gwp.start();
  gw = new Gateway(gwp.addr, { interceptors: [recorder] });
});

after(async () => {
  for (const s of sessions) await s.close("test done", { timeoutMs: 10_000 });
  gw?.close();
  await gwp.stop();
});

async function open(): Promise<Session> {
  const s = await gw.openSession({ clientName: "ts-jobs" }, { timeoutMs: 10_000 });
  sessions.push(s);
  return s;
}

async function collect(it: AsyncIterable<WatchItem>): Promise<WatchItem[]> {
  const out: WatchItem[] = [];
  for await (const x of it) out.push(x);
  return out;
}

const calls = (method: string) => seen.filter(([m]) => m === method).map(([, md]) => md);

describe("the ARCP job surface", { timeout: 60_000 }, () => {
  it("submits with a version, lease, expiry, extensions and traceparent, and answers with them", async () => {
    const s = await open();
    const expires = new Date(Math.floor(Date.now() / 1000) * 1000 + 3_600_000);
    const job = await s.submit("sleep", { ms: 50 }, {
      agentVersion: "1.0.0",
      lease: { "fs.read": ["/workspace/**"], "cost.budget": ["USD:5.00"] },
      leaseExpiresAt: expires,
      extensions: { "x-vendor.acme.tag": "blue", "x-vendor.acme.n": 3 },
      traceparent: TRACEPARENT,
      timeoutMs: 10_000,
    });
    assert.equal(job.agent, "sleep@1.0.0");
    assert.equal(job.traceId, TRACE_ID);
    assert.deepEqual(job.lease, { "fs.read": ["/workspace/**"], "cost.budget": ["USD:5.00"] });
    assert.ok(job.leaseExpiresAt instanceof Date);
    assert.equal(job.leaseExpiresAt.getTime(), expires.getTime());
    assert.deepEqual(job.budget, { USD: 5 });
    assert.equal(job.extensions["x-vendor.acme.tag"], "blue");
    assert.deepEqual(calls("SubmitJob").at(-1)!.get(TRACEPARENT_METADATA_KEY), [TRACEPARENT]);

    const items = await collect(s.watch(job, { timeoutMs: 30_000 }));
    const progress = items.flatMap((i) => (i.type === "event" && i.progress ? [i.progress] : []));
    assert.ok(progress.length > 0, "no typed progress");
    assert.equal(typeof progress[0]!.current, "number");
    const last = items.at(-1)!;
    assert.equal(last.type, "result");
    assert.equal(last.extensions["x-vendor.acme.tag"], "blue");
  });

  it("runs a streamed result and returns its id, size and trace id", async () => {
    const s = await open();
    const r = await s.run("chunked", { size: 100, chunk_bytes: 40 }, { traceparent: TRACEPARENT, timeoutMs: 10_000 });
    assert.equal(r.traceId, TRACE_ID);
    assert.match(r.agent, /^chunked@/);
    assert.ok(r.resultId);
    assert.equal(r.resultSize, 100);
    const job = await s.submit("chunked", { size: 100, chunk_bytes: 40 }, { timeoutMs: 10_000 });
    const chunks = (await collect(s.watch(job, { timeoutMs: 30_000 }))).flatMap((i) =>
      i.type === "event" && i.resultChunk ? [i.resultChunk] : [],
    );
    assert.ok(chunks.length >= 3, `${chunks.length} chunks`);
    assert.deepEqual(chunks.map((c) => c.chunkSeq), chunks.map((_, i) => i));
    assert.equal(chunks.at(-1)!.more, false);

    // Without a traceparent the job gets a fresh trace id and none is sent.
    const fresh = await s.run("echo", "x", { timeoutMs: 10_000 });
    assert.match(fresh.traceId, /^[0-9a-f]{32}$/);
    assert.notEqual(fresh.traceId, TRACE_ID);
    assert.deepEqual(calls("RunJob").at(-1)!.get(TRACEPARENT_METADATA_KEY), []);
  });

  it("refuses a malformed traceparent and bad extras with typed errors", async () => {
    const s = await open();
    for (const bad of ["", "00-" + "0".repeat(32) + "-00f067aa0ba902b7-01", TRACEPARENT.toUpperCase(), TRACEPARENT + "-x"]) {
      assert.equal(isTraceparent(bad), false, bad);
      await assert.rejects(s.run("echo", "x", { traceparent: bad }), TypeError);
    }
    assert.ok(isTraceparent("01-" + TRACEPARENT.slice(3) + "-future"));
    await assert.rejects(s.run("echo", null, { lease: { "cost.budget": ["USD:1000"] }, timeoutMs: 10_000 }), PermissionDeniedError);
    await assert.rejects(s.submit("echo", null, { leaseExpiresAt: new Date(Date.now() - 60_000), timeoutMs: 10_000 }), InvalidArgumentError);
    await assert.rejects(s.submit("echo", null, { extensions: { acme: true }, timeoutMs: 10_000 }), InvalidArgumentError);
    await assert.rejects(s.submit("echo", null, { agentVersion: "9.9.9", timeoutMs: 10_000 }), NotFoundError);
    await assert.rejects(s.submit("echo", null, { leaseExpiresAt: new Date(NaN) }), TypeError);
  });

  it("lists jobs across pages, a page per call", async () => {
    const s = await open();
    const want = new Set<string>();
    for (let i = 0; i < 3; i++) want.add((await s.run("echo", i, { timeoutMs: 10_000 })).jobId);
    await s.run("sleep", { ms: 1 }, { timeoutMs: 10_000 });
    const before = calls("ListJobs").length;
    const got = new Set<string>();
    for await (const j of s.listJobs('state = SUCCEEDED AND agent = "echo"', { pageSize: 1, timeoutMs: 10_000 })) {
      assert.equal(j.state, "succeeded");
      assert.match(j.agent, /^echo/);
      assert.ok(j.createdAt instanceof Date);
      assert.match(j.traceId, /^[0-9a-f]{32}$/);
      got.add(j.jobId);
    }
    assert.deepEqual([...got].sort(), [...want].sort());
    assert.ok(calls("ListJobs").length - before >= 3);
    const n = calls("ListJobs").length;
    for await (const _ of s.listJobs("", { pageSize: 1 })) break;
    assert.equal(calls("ListJobs").length, n + 1);
    await assert.rejects(
      async () => {
        for await (const _ of s.listJobs('owner = "me"')) void _;
      },
      (e: unknown) => e instanceof InvalidArgumentError && /unknown field/.test(e.message),
    );
  });

  it("subscribes a second session to a job, which watches but cannot cancel it", async () => {
    const a = await open();
    const b = await open();
    const job = await a.submit("stream", { count: 4, interval_ms: 50 }, {
      lease: { "cost.budget": ["USD:2.50"] },
      traceparent: TRACEPARENT,
      timeoutMs: 10_000,
    });
    const sub = await b.subscribe(job, { history: true, timeoutMs: 10_000 });
    assert.equal(sub.job.jobId, job.jobId);
    assert.equal(sub.job.agent, job.agent);
    assert.equal(sub.job.traceId, TRACE_ID);
    assert.deepEqual(sub.job.budget, { USD: 2.5 });
    assert.deepEqual(sub.job.lease, { "cost.budget": ["USD:2.50"] });
    await assert.rejects(b.cancel(job, "not mine", { timeoutMs: 10_000 }), PermissionDeniedError);
    const items = await collect(b.watch(job, { timeoutMs: 30_000 }));
    assert.equal(items.at(-1)!.type, "result");
    await assert.rejects(b.subscribe("job_nope", { timeoutMs: 10_000 }), NotFoundError);
  });
});
