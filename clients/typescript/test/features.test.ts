// Serialisable results, refused inputs, error classes and watches that resume
// themselves after a cut, against a real gateway binary (see gateway.ts); and
// the resume rules apart from any I/O, with a property test over random
// schedules (the seed is printed on failure; SESSIONGATE_SEED=<n> replays one).

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import * as grpc from "@grpc/grpc-js";

import {
  AbortedError,
  CancelledError,
  ClientClosedError,
  Gateway,
  GatewayError,
  NotFoundError,
  toValue,
  UnavailableError,
  UnimplementedError,
  type Session,
  type WatchItem,
} from "../src/index.js";
import { fromServiceError } from "../src/errors.js";
import { Resumer, resumable } from "../src/resume.js";
import { ClusterProcess, CutProxy, GatewayProcess } from "./gateway.js";

const gwp = new GatewayProcess();
let gw: Gateway;

before(async () => {
  await gwp.start();
  gw = new Gateway(gwp.addr);
});

after(async () => {
  gw?.close();
  await gwp.stop();
});

const err = (code: number, reason?: string) => new GatewayError(code, "x", reason ? { reason, domain: "sessiongate" } : {});

describe("resume rules", () => {
  it("resumes only on a cut", () => {
    const cases: [GatewayError, boolean][] = [
      [err(14), true],
      [err(14, "SESSION_HANDED_OFF"), true],
      [err(14, "OWNER_UNREACHABLE"), true],
      [err(14, "NOT_OWNER"), true],
      [err(14, "DIRECTORY_UNAVAILABLE"), true],
      [err(14, "DRAINING"), true],
      [err(14, "REPLICA_SILENT"), true],
      [new GatewayError(13, "Received RST_STREAM with code 2"), true],
      [new GatewayError(13, "Received RST_STREAM with code 2", { reason: "INTERNAL", domain: "sessiongate" }), false],
      [err(13), false],
      [err(14, "SESSION_LOST"), false],
      [err(14, "SESSION_CLOSED"), false],
      [err(5, "JOB_NOT_FOUND"), false],
      [err(1), false],
      [err(4), false],
    ];
    for (const [e, want] of cases) assert.equal(resumable(e), want, `${e.codeName} ${e.reason}`);
    assert.equal(resumable(new Error("x")), false);
    assert.equal(new Resumer(0, undefined).cut(err(14), 0), undefined, "off");
  });

  it("backs off, resets after an item, and keeps to the deadline", () => {
    const r = new Resumer(0, { maxAttempts: 4, initialBackoffMs: 100, maxBackoffMs: 300 }, undefined, () => 1);
    assert.deepEqual([0, 1, 2, 3, 4].map(() => r.cut(err(14), 0)), [100, 200, 300, 300, undefined]);
    assert.ok(r.deliver(1, false));
    assert.equal(r.cut(err(14), 0), 100);
    const d = new Resumer(0, { initialBackoffMs: 1000, maxBackoffMs: 1000 }, 10_000, () => 1);
    assert.equal(d.cut(err(14), 0), 1000);
    assert.equal(d.cut(err(14), 9_500), undefined, "a backoff past the deadline");
  });

  it("keeps its invariants over random schedules", () => {
    const seeds = process.env.SESSIONGATE_SEED ? [Number(process.env.SESSIONGATE_SEED)] : [...Array(300).keys()];
    for (const seed of seeds) {
      try {
        schedule(seed);
      } catch (e) {
        throw new Error(`seed ${seed} (replay: SESSIONGATE_SEED=${seed}): ${(e as Error).message}`);
      }
    }
  });
});

/** Polls listJobs until a job matches filter; resolves with its id. */
async function waitJob(s: Session, filter: string): Promise<string> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    for await (const j of s.listJobs(filter, { timeoutMs: 10_000 })) return j.jobId;
    if (Date.now() > deadline) throw new Error(`no job matches ${filter}`);
    await new Promise((res) => setTimeout(res, 20));
  }
}

/** A small seeded PRNG (mulberry32), so a failing schedule can be replayed. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function schedule(seed: number): void {
  const rand = rng(seed);
  const int = (lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));
  const policy = { maxAttempts: int(1, 5), initialBackoffMs: 10, maxBackoffMs: 500 };
  const deadline = rand() < 0.5 ? undefined : int(500, 5000);
  const start = int(0, 5);
  const r = new Resumer(start, policy, deadline, rand);
  const seen: number[] = [];
  let serverSeq = start;
  let now = 0;
  let inARow = 0;
  for (let n = int(1, 60); n > 0; n--) {
    const step = rand();
    if (step < 0.55) {
      const seq = serverSeq + int(1, 3);
      if (r.deliver(seq, rand() < 0.05)) {
        seen.push(seq);
        inARow = 0;
      }
      serverSeq = seq;
    } else if (step < 0.7) {
      assert.equal(r.deliver(int(0, r.cursor), false), false, "a duplicate was delivered");
    } else {
      const ok = rand() < 0.7;
      const e = ok ? err(14, rand() < 0.5 ? undefined : "SESSION_HANDED_OFF") : err(14, "SESSION_LOST");
      const wasDone = r.done;
      const delay = r.cut(e, now);
      if (delay === undefined) break;
      assert.ok(ok, "a non-retryable cut was resumed");
      assert.ok(!wasDone, "resumed after the terminal item");
      assert.ok(++inARow <= policy.maxAttempts, "more resumes in a row than maxAttempts");
      assert.ok(delay <= policy.maxBackoffMs);
      if (deadline !== undefined) assert.ok(now + delay < deadline, "a backoff past the deadline");
      now += delay;
      serverSeq = r.cursor;
    }
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i] > seen[i - 1], `not increasing: ${seen}`);
    assert.ok(seen.every((s) => s > start));
    if (r.done) assert.equal(r.deliver(serverSeq + 1, false), false, "an item after the terminal one");
  }
}

describe("against a gateway", { timeout: 120_000 }, () => {
  async function open(g: Gateway = gw): Promise<Session> {
    return g.openSession({ clientName: "ts-features" }, { timeoutMs: 10_000 });
  }

  it("serialises results, statuses, jobs and watch items with JSON.stringify", async () => {
    const s = await open();
    try {
      const r = await s.run("echo", { a: [1, "x"] }, { timeoutMs: 10_000 });
      assert.deepEqual(JSON.parse(JSON.stringify(r)).result, { a: [1, "x"] });
      const st = await s.status({ timeoutMs: 10_000 });
      assert.equal(JSON.parse(JSON.stringify(st)).generation, st.generation);
      const job = await s.submit("stream", { count: 2 }, { timeoutMs: 10_000 });
      const items: WatchItem[] = [];
      for await (const i of s.watch(job, { timeoutMs: 30_000 })) items.push(i);
      const back = JSON.parse(JSON.stringify(items));
      assert.deepEqual(back.map((i: { eventSeq: number }) => i.eventSeq), items.map((i) => i.eventSeq));
      const jobs: unknown[] = [];
      for await (const j of s.listJobs("", { timeoutMs: 10_000 })) jobs.push(j);
      assert.doesNotThrow(() => JSON.stringify(jobs));
    } finally {
      await s.close("", { timeoutMs: 10_000 });
    }
  });

  it("refuses what JSON cannot carry, naming the path", () => {
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = { back: cyclic };
    const cases: [unknown, RegExp][] = [
      [{ m: new Map([["k", 1]]) }, /^input\.m: a Map is not JSON-like/],
      [{ s: new Set([1]) }, /^input\.s: a Set is not JSON-like/],
      [{ b: [0, new Uint8Array([1, 2])] }, /^input\.b\[1\]: a Uint8Array is not JSON-like/],
      [{ b: new ArrayBuffer(2) }, /^input\.b: an ArrayBuffer is not JSON-like/],
      [cyclic, /^input\.self\.back: a circular reference is not JSON/],
      [{ n: [NaN] }, /^input\.n\[0\]: NaN is not a JSON number/],
      [{ n: -Infinity }, /^input\.n: -Infinity is not a JSON number/],
      [{ n: 1n }, /^input\.n: bigint/],
      [{ f: () => 1 }, /^input\.f: function is not JSON/],
      [{ c: new (class Point {})() }, /^input\.c: a Point is not JSON-like/],
    ];
    for (const [v, re] of cases) assert.throws(() => toValue(v), (e: unknown) => e instanceof TypeError && re.test(e.message), String(re));
    // A shared (not circular) object is fine, and so are null-prototype objects and Dates.
    const shared = { x: 1 };
    const bare = Object.assign(Object.create(null) as object, { y: 2 });
    assert.doesNotThrow(() => toValue({ a: shared, b: shared, c: bare, d: new Date(0) }));
  });

  it("has an error class for every gRPC code, named after it", async () => {
    const errors = await import("../src/index.js");
    const { Metadata, status } = await import("@grpc/grpc-js");
    const classes = new Set<unknown>();
    for (const [name, code] of Object.entries(status)) {
      if (typeof code !== "number" || code === status.OK) continue;
      const e = fromServiceError(Object.assign(new Error(name), { code, details: name, metadata: new Metadata() }));
      // DEADLINE_EXCEEDED → DeadlineExceededError, …
      const want = name.toLowerCase().replace(/(^|_)([a-z])/g, (_, __, c: string) => c.toUpperCase()) + "Error";
      assert.equal(e.constructor.name, want, name);
      assert.equal(e.constructor, (errors as Record<string, unknown>)[want], `${want} is not exported`);
      assert.ok(e instanceof GatewayError);
      assert.equal(e.code, code);
      assert.equal(e.codeName, name);
      classes.add(e.constructor);
    }
    assert.equal(classes.size, 16, "one class per code");
  });

  it("has an error class for ABORTED, NOT_FOUND and UNIMPLEMENTED", async () => {
    const s = await open();
    try {
      await assert.rejects(s.run("fail", { code: "INTERNAL_ERROR" }, { timeoutMs: 10_000 }), (e: unknown) => {
        assert.ok(e instanceof AbortedError);
        assert.equal(e.reason, "INTERNAL_ERROR");
        return true;
      });
      await assert.rejects(s.cancel("j-nosuch", "", { timeoutMs: 10_000 }), NotFoundError);
    } finally {
      await s.close("", { timeoutMs: 10_000 });
    }
    const { fromServiceError } = await import("../src/errors.js");
    const { Metadata } = await import("@grpc/grpc-js");
    const e = fromServiceError(Object.assign(new Error("x"), { code: 12, details: "no such method", metadata: new Metadata() }));
    assert.ok(e instanceof UnimplementedError);
  });

  it("rejects calls on a closed Gateway with ClientClosedError, and sends nothing", async () => {
    const closed = (e: unknown) =>
      e instanceof ClientClosedError &&
      e instanceof CancelledError &&
      e.code === 1 &&
      e.reason === "CLIENT_CLOSED" &&
      e.domain === "sessiongate.client";
    const g = new Gateway(gwp.addr);
    const s = await open(g);
    const other = gw.session(s.id);
    try {
      g.close();
      g.close(); // idempotent
      await assert.rejects(s.run("echo", { a: 1 }, { timeoutMs: 10_000 }), closed);
      await assert.rejects(s.submit("echo", { a: 1 }, { timeoutMs: 10_000 }), closed);
      await assert.rejects(s.status({ timeoutMs: 10_000 }), closed);
      await assert.rejects(g.openSession({}, { timeoutMs: 10_000 }), closed);
      await assert.rejects(s.watch("j-any", { timeoutMs: 10_000 }).next(), closed);
      await assert.rejects(s.listJobs("", { timeoutMs: 10_000 }).next(), closed);
      await assert.rejects(s.close("", { timeoutMs: 10_000 }), closed);
      // Nothing reached the gateway: the session is live and ran no job.
      assert.equal((await other.status({ timeoutMs: 10_000 })).status, "live");
      const jobs: unknown[] = [];
      for await (const j of other.listJobs("", { timeoutMs: 10_000 })) jobs.push(j);
      assert.deepEqual(jobs, []);
    } finally {
      await other.close("", { timeoutMs: 10_000 });
    }
  });

  it("a watch cut after its Gateway was closed rejects with ClientClosedError rather than re-opening", async () => {
    const proxy = await new CutProxy(gwp.addr).start();
    const pg = new Gateway(proxy.addr);
    const s = await open(pg);
    try {
      const job = await s.submit("stream", { count: 50, interval_ms: 40 }, { timeoutMs: 10_000 });
      let n = 0;
      await assert.rejects(
        (async () => {
          for await (const i of s.watch(job, { timeoutMs: 60_000 })) {
            if (i.type === "event" && ++n === 3) {
              pg.close(); // the running stream goes on …
              proxy.cut(); // … until the connection drops: UNAVAILABLE, which would re-open the watch
            }
          }
        })(),
        (e: unknown) => e instanceof ClientClosedError,
      );
      assert.ok(n >= 3 && n < 50, `events before the cut: ${n}`);
      assert.equal(proxy.connections, 1, "the watch re-opened on a closed Gateway");
    } finally {
      await gw.session(s.id).close("", { timeoutMs: 10_000 });
      await proxy.close();
    }
  });

  it("aborting a run cancels the job: the runtime reports it cancelled", async () => {
    const s = await open();
    try {
      const ac = new AbortController();
      const run = s.run("sleep", { ms: 30_000 }, { signal: ac.signal, timeoutMs: 60_000 });
      const running = await waitJob(s, 'state = RUNNING AND agent = "sleep"');
      ac.abort();
      await assert.rejects(run, (e: unknown) => e instanceof Error && e.name === "AbortError");
      assert.equal(await waitJob(s, 'state = CANCELLED AND agent = "sleep"'), running);
    } finally {
      await s.close("", { timeoutMs: 10_000 });
    }
  });

  for (const resume of [true, false]) {
    it(`a watch cut mid-stream ${resume ? "resumes: every event once, in order" : "ends at the cut with resume: false"}`, async () => {
      const proxy = await new CutProxy(gwp.addr).start();
      const pg = new Gateway(proxy.addr);
      const s = await open(pg);
      try {
        const job = await s.submit("stream", { count: 12, interval_ms: 60 }, { timeoutMs: 10_000 });
        const items: WatchItem[] = [];
        let failure: unknown;
        try {
          for await (const i of s.watch(job, { timeoutMs: 60_000, resume })) {
            items.push(i);
            if (items.length === 3 || items.length === 7) proxy.cut();
          }
        } catch (e) {
          failure = e;
        }
        if (resume) {
          assert.equal(failure, undefined);
          assert.ok(proxy.connections >= 2, `connections: ${proxy.connections}`);
          const events = items.filter((i) => i.type === "event");
          assert.deepEqual(events.map((e) => (e.body as { i: number }).i), [...Array(12).keys()]);
          const last = items.at(-1)!;
          assert.equal(last.type, "result");
          assert.deepEqual(last.type === "result" && last.result, { count: 12 });
        } else {
          assert.ok(failure instanceof UnavailableError, String(failure));
          assert.equal(items.length, 3);
        }
      } finally {
        await s.close("", { timeoutMs: 10_000 }).catch(() => {});
        pg.close();
        await proxy.close();
      }
    });
  }
});

describe("in a cluster", { timeout: 120_000 }, () => {
  it("a watch on the session's owner resumes across the owner's drain (SESSION_HANDED_OFF) from its cursor: every event once, in order", async (t) => {
    if (!ClusterProcess.available()) {
      if (process.env.CI === "true") assert.fail("redis-server is not on PATH (CI=true: apt-get install -y redis-server)");
      t.skip("redis-server is not on PATH");
      return;
    }
    const cluster = await new ClusterProcess().start();
    // Every WatchJob stream opened (its from_event_seq, and the seq of the
    // last item the loop had then) and every status it ended with.
    type Entry = { open: true; from: number; delivered: number } | { open: false; code: number; reason?: string; details: string };
    const log: Entry[] = [];
    let delivered = 0;
    const recorder: grpc.Interceptor = (options, nextCall) => {
      if (!options.method_definition.path.endsWith("/WatchJob")) return new grpc.InterceptingCall(nextCall(options));
      return new grpc.InterceptingCall(nextCall(options), {
        sendMessage(message: { fromEventSeq: bigint }, next) {
          log.push({ open: true, from: Number(message.fromEventSeq), delivered });
          next(message);
        },
        start(metadata, listener, next) {
          next(metadata, {
            onReceiveStatus(st, nextStatus) {
              // CANCELLED is the client ending a stream it is done with (after
              // the terminal item, before the server's status came): not a cut.
              if (st.code !== grpc.status.OK && st.code !== grpc.status.CANCELLED) {
                const e = fromServiceError(Object.assign(new Error(st.details), st) as grpc.ServiceError);
                log.push({ open: false, code: st.code, reason: e.reason, details: st.details });
              }
              nextStatus(st);
            },
          });
        },
      });
    };
    // pick_first over every replica: one connection (to the first, unless
    // it is slow to connect) carries every call, so the session is opened on
    // that replica and the watch is open on it, the owner; after its drain
    // the channel moves on to another replica, which reaches the adopter.
    const g = new Gateway(`ipv4:${cluster.replicas.map((r) => r.addr).join(",")}`, {
      interceptors: [recorder],
      loadBalancing: "pick_first",
    });
    let drained: Promise<void> | undefined;
    try {
      const s = await g.openSession({ clientName: "ts-handoff" }, { timeoutMs: 10_000 });
      const owner = cluster.replicas.find((_, i) => s.id.startsWith(`s1.gw-${i + 1}.`));
      assert.ok(owner, `the session ${s.id} names no replica`);
      const job = await s.submit("stream", { count: 60, interval_ms: 50 }, { timeoutMs: 10_000 });
      const seen: number[] = [];
      let last: WatchItem | undefined;
      for await (const item of s.watch(job, { timeoutMs: 60_000, resume: { maxAttempts: 40, maxBackoffMs: 500 } })) {
        delivered = item.eventSeq;
        last = item;
        if (item.type !== "event") continue;
        seen.push((item.body as { i: number }).i);
        if (seen.length === 10) drained = owner.stop(); // SIGTERM: the owner hands its sessions off
      }
      await drained;
      assert.deepEqual(seen, [...Array(60).keys()], "every event once, in order, across the hand-off");
      assert.equal(last?.type, "result");

      const cuts = log.filter((e) => !e.open);
      const opens = log.filter((e) => e.open);
      t.diagnostic(`${opens.length} streams; cuts ${cuts.map((c) => `${c.code} ${c.reason ?? ""}`).join(", ")}`);
      const handedOff = log.findIndex((e) => !e.open && e.code === grpc.status.UNAVAILABLE && e.reason === "SESSION_HANDED_OFF");
      assert.ok(handedOff >= 0, `no stream was cut with SESSION_HANDED_OFF: ${JSON.stringify(cuts)}`);
      for (const c of cuts) {
        assert.ok(!c.open && c.code === grpc.status.UNAVAILABLE, `a cut the watch does not resume after: ${JSON.stringify(c)}`);
      }
      assert.ok(log.slice(handedOff + 1).some((e) => e.open), "the watch was not re-opened after the hand-off");
      opens.forEach((o, i) => {
        if (o.open) assert.equal(o.from, i === 0 ? 0 : o.delivered, `stream ${i + 1} was not opened from the last delivered seq`);
      });
    } finally {
      g.close();
      await drained;
      await cluster.stop();
    }
  });


  it("a watch through a relaying replica resumes across the owner's SIGKILL: every event once, in order", async (t) => {
    if (!ClusterProcess.available()) {
      if (process.env.CI === "true") assert.fail("redis-server is not on PATH (CI=true: apt-get install -y redis-server)");
      t.skip("redis-server is not on PATH");
      return;
    }
    const cluster = await new ClusterProcess().start();
    const [owner, relay] = cluster.replicas;
    const gw1 = new Gateway(owner.addr);
    const gw2 = new Gateway(relay.addr);
    try {
      const s = await gw1.openSession({ clientName: "ts-takeover" }, { timeoutMs: 10_000 });
      const job = await s.submit("stream", { count: 40, interval_ms: 50 }, { timeoutMs: 10_000 });
      const seen: number[] = [];
      let last: WatchItem | undefined;
      const policy = { maxAttempts: 40, maxBackoffMs: 500 };
      for await (const item of gw2.session(s.id).watch(job, { timeoutMs: 60_000, resume: policy })) {
        last = item;
        if (item.type !== "event") continue;
        seen.push((item.body as { i: number }).i);
        if (seen.length === 10) await owner.kill();
      }
      assert.deepEqual(seen, [...Array(40).keys()], "every event once, in order, across the takeover");
      assert.equal(last?.type, "result");
    } finally {
      gw1.close();
      gw2.close();
      await cluster.stop();
    }
  });
});
