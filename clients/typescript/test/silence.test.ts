// A watch on a silent replica is bounded (src/silence.ts): a fake gateway
// whose WatchJob stops sending and whose health check does not answer (a
// frozen replica) makes the watch end REPLICA_SILENT and resume from its
// cursor; one whose health check answers is waited for.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";

import {
  JobEventSchema,
  JobResultSchema,
  WatchJobResponseSchema,
  type WatchJobRequest,
} from "../src/gen/sessiongate/v1/sessiongate_pb.js";
import { DeadlineExceededError, Gateway, type GatewayOptions } from "../src/index.js";
import { watchJobDef } from "./fake-defs.js";

const item = (seq: number) =>
  create(WatchJobResponseSchema, {
    eventSeq: BigInt(seq),
    item:
      seq === 6
        ? { case: "result", value: create(JobResultSchema, { summary: "done" }) }
        : { case: "event", value: create(JobEventSchema, { kind: "log" }) },
  });

/**
 * A fake replica: WatchJob sends fromEventSeq+1 … 6 (the result); the first
 * stream stops after event 3. frozen: until that stream is cancelled, health
 * checks go unanswered, as on a SIGSTOPped replica. Not frozen: the first
 * stream pauses pauseMs and goes on, and health checks answer.
 */
async function replica(frozen: boolean, pauseMs = 0) {
  const opened: number[] = [];
  const checks: (string | undefined)[] = [];
  let thawed = !frozen;
  const waiting: (() => void)[] = [];
  const thaw = () => {
    thawed = true;
    for (const f of waiting.splice(0)) f();
  };
  const server = new grpc.Server();
  server.addService(
    {
      WatchJob: watchJobDef,
      Check: {
        path: "/grpc.health.v1.Health/Check",
        requestStream: false,
        responseStream: false,
        requestSerialize: (b: Buffer) => b,
        requestDeserialize: (b: Buffer) => b,
        responseSerialize: (b: Buffer) => b,
        responseDeserialize: (b: Buffer) => b,
      },
    } as grpc.ServiceDefinition,
    {
      WatchJob: async (call: grpc.ServerWritableStream<WatchJobRequest, unknown>) => {
        const from = Number(call.request.fromEventSeq);
        const first = opened.length === 0;
        opened.push(from);
        for (let seq = from + 1; seq <= 6; seq++) {
          if (first && seq === 4) {
            if (frozen) {
              call.on("cancelled", thaw); // the client left: the replica may answer again
              return;
            }
            await new Promise((res) => setTimeout(res, pauseMs)); // a quiet job on a live replica
          }
          call.write(item(seq));
        }
        call.end();
      },
      Check: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        checks.push(call.metadata.get("x-sessiongate-session")[0] as string | undefined);
        const answer = () => cb(null, Buffer.from([8, 1])); // SERVING
        if (thawed) answer();
        else waiting.push(answer);
      },
    },
  );
  const port = await new Promise<number>((res, rej) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? rej(err) : res(p))),
  );
  return { addr: `127.0.0.1:${port}`, server, opened, checks, thaw };
}

async function watchAll(addr: string, opts: GatewayOptions, timeoutMs: number): Promise<number[]> {
  using gw = new Gateway(addr, { retry: false, ...opts });
  const seqs: number[] = [];
  for await (const it of gw.session("s1.test").watch("j1", { timeoutMs })) seqs.push(it.eventSeq);
  return seqs;
}

describe("silence bound", () => {
  it("ends a watch on a silent replica REPLICA_SILENT and resumes it from its cursor", async () => {
    const r = await replica(true);
    try {
      const started = Date.now();
      assert.deepEqual(await watchAll(r.addr, {}, 20_000), [1, 2, 3, 4, 5, 6]);
      assert.deepEqual(r.opened, [0, 3]);
      assert.equal(r.checks[0], "s1.test", "the check carries the session header");
      assert.ok(Date.now() - started < 10_000, "left the silent replica well before the watch's deadline");
    } finally {
      r.thaw();
      r.server.forceShutdown();
    }
  });

  it("keeps a quiet watch on a live replica", async () => {
    const r = await replica(false, 2000);
    try {
      assert.deepEqual(await watchAll(r.addr, {}, 20_000), [1, 2, 3, 4, 5, 6]);
      assert.deepEqual(r.opened, [0], "not cut");
      assert.ok(r.checks.length >= 2, `checked while quiet (${r.checks.length})`);
    } finally {
      r.server.forceShutdown();
    }
  });

  it("is off with silenceBound: false", async () => {
    const r = await replica(true);
    try {
      await assert.rejects(watchAll(r.addr, { silenceBound: false }, 3000), DeadlineExceededError);
      assert.deepEqual(r.opened, [0]);
      assert.deepEqual(r.checks, []);
    } finally {
      r.thaw();
      r.server.forceShutdown();
    }
  });
});
