// No job runs twice because of a retry (the TypeScript client): a server
// budget shorter than the job with the published retry policy on creates
// one job at the runtime, and every attempt of one call carries one
// idempotency key.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";

import { RunJobResponseSchema, SubmitJobResponseSchema } from "../src/gen/sessiongate/v1/sessiongate_pb.js";
import { Gateway, TimeoutExceededError } from "../src/index.js";
import { runJobDef, submitJobDef } from "./fake-defs.js";
import { GatewayProcess } from "./gateway.js";

const gwp = new GatewayProcess();

before(async () => {
  await gwp.start();
});

after(async () => {
  await gwp.stop();
});

/** The embedded reference runtime's own counts from the gateway's /metrics. */
async function runtimeJobs(): Promise<{ submitted: number; accepted: number }> {
  const text = await (await fetch(`http://${gwp.admin}/metrics`)).text();
  const get = (name: string) => {
    const line = text.split("\n").find((l) => l.startsWith(name + " "));
    assert.ok(line, `${name} missing from /metrics`);
    return Number(line.split(" ")[1]);
  };
  return {
    submitted: get("sessiongate_embedded_runtime_jobs_submitted_total"),
    accepted: get("sessiongate_embedded_runtime_jobs_accepted_total"),
  };
}

describe("retries", () => {
  it("a server budget shorter than the job runs one job", async () => {
    using gw = new Gateway(gwp.addr);
    await using s = await gw.openSession({ clientName: "ts-retry" }, { timeoutMs: 10_000 });
    const before = await runtimeJobs();
    await assert.rejects(
      s.run("sleep", { ms: 2500 }, { serverTimeoutMs: 1000, timeoutMs: 30_000 }),
      (e: unknown) => e instanceof TimeoutExceededError && e.limit === "unary",
    );
    const after = await runtimeJobs();
    assert.deepEqual(
      { submitted: after.submitted - before.submitted, accepted: after.accepted - before.accepted },
      { submitted: 1, accepted: 1 },
    );
  });

  it("every attempt of one call carries one idempotency key", async () => {
    const keys: string[] = [];
    const attempt = (key: string): grpc.ServiceError | null => {
      keys.push(key);
      if (keys.length % 2 === 1) {
        return Object.assign(new Error("first attempt fails"), {
          code: grpc.status.UNAVAILABLE,
          details: "first attempt fails",
          metadata: new grpc.Metadata(),
        });
      }
      return null;
    };
    const server = new grpc.Server();
    server.addService(
      {
        RunJob: runJobDef,
        SubmitJob: submitJobDef,
      } as grpc.ServiceDefinition,
      {
        RunJob: (call: grpc.ServerUnaryCall<{ idempotencyKey: string }, unknown>, cb: grpc.sendUnaryData<unknown>) => {
          const err = attempt(call.request.idempotencyKey);
          cb(err, err ? undefined : create(RunJobResponseSchema, { jobId: "j" }));
        },
        SubmitJob: (call: grpc.ServerUnaryCall<{ idempotencyKey: string }, unknown>, cb: grpc.sendUnaryData<unknown>) => {
          const err = attempt(call.request.idempotencyKey);
          cb(err, err ? undefined : create(SubmitJobResponseSchema, { jobId: "j" }));
        },
      },
    );
    const port = await new Promise<number>((res, rej) =>
      server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? rej(err) : res(p))),
    );
    try {
      using gw = new Gateway(`127.0.0.1:${port}`);
      const s = gw.session("s1.test");
      await s.run("echo", 1, { timeoutMs: 10_000 });
      await s.run("echo", 1, { timeoutMs: 10_000 });
      await s.submit("echo", 1, { timeoutMs: 10_000 });
      await s.run("echo", 1, { idempotencyKey: "mine", timeoutMs: 10_000 });
    } finally {
      server.forceShutdown();
    }
    assert.equal(keys.length, 8, JSON.stringify(keys));
    const firsts = new Set<string>();
    for (let i = 0; i < keys.length; i += 2) {
      assert.ok(keys[i], "a key");
      assert.equal(keys[i], keys[i + 1], "the attempts of one call carry one key");
      firsts.add(keys[i]);
    }
    assert.equal(firsts.size, 4, "each call has its own key");
    assert.equal(keys[6], "mine");
  });
});
