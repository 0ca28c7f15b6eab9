// A watch cut by a stream reset or by REPLICA_SILENT resumes from its cursor.
//
// The reset is the real thing: a real nginx (Debian's) in front of an
// in-process fake gateway, through a TCP relay (CutProxy) that resets the
// connection mid-stream, as a SIGKILLed gateway's kernel does; nginx then
// resets the client's HTTP/2 stream with INTERNAL_ERROR (grpc-js: INTERNAL
// "Received RST_STREAM with code 2").

import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";

import { create, toBinary } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import * as grpc from "@grpc/grpc-js";

import { ErrorInfoSchema } from "../src/gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../src/gen/google/rpc/status_pb.js";
import {
  JobEventSchema,
  JobResultSchema,
  RunJobResponseSchema,
  type RunJobRequest,
  WatchJobResponseSchema,
  type WatchJobRequest,
} from "../src/gen/sessiongate/v1/sessiongate_pb.js";
import { Gateway, GatewayError, InternalError, streamReset } from "../src/index.js";
import { CutProxy, REPO } from "./gateway.js";
import { runJobDef, watchJobDef } from "./fake-defs.js";

type WatchCall = grpc.ServerWritableStream<WatchJobRequest, unknown>;

/** A fake gateway serving WatchJob with handler. */
async function fakeGateway(handler: (call: WatchCall) => void): Promise<{ addr: string; server: grpc.Server }> {
  const server = new grpc.Server();
  server.addService(
    {
      WatchJob: watchJobDef,
    } as grpc.ServiceDefinition,
    { WatchJob: handler },
  );
  const port = await new Promise<number>((res, rej) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? rej(err) : res(p))),
  );
  return { addr: `127.0.0.1:${port}`, server };
}

const item = (seq: number, last: number) =>
  create(WatchJobResponseSchema, {
    eventSeq: BigInt(seq),
    item:
      seq === last
        ? { case: "result", value: create(JobResultSchema, { summary: "done" }) }
        : { case: "event", value: create(JobEventSchema, { kind: "log" }) },
  });

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((res) => s.listen(0, "127.0.0.1", res));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((res) => s.close(() => res()));
  return port;
}

/** A real nginx in front of upstream (host:port), in a temp dir; grpc_pass as the recipe. */
class Nginx {
  addr = "";
  #dir = mkdtempSync(join(tmpdir(), "sgts-nginx-"));
  #proc?: ChildProcess;

  static binary(): string | undefined {
    for (const b of ["nginx", "/usr/sbin/nginx"]) {
      if (spawnSync(b, ["-v"]).status === 0) return b;
    }
    return undefined;
  }

  async start(upstream: string): Promise<this> {
    const bin = Nginx.binary();
    if (!bin) throw new Error("nginx is not installed (apt-get install -y nginx)");
    mkdirSync(join(this.#dir, "tmp"));
    const port = await freePort();
    writeFileSync(
      join(this.#dir, "sessiongate.conf"),
      readFileSync(join(REPO, "clients", "testdata", "reset-nginx.conf"), "utf8")
        .replace("LISTEN_ADDR", `127.0.0.1:${port}`)
        .replace("UPSTREAM_ADDR", upstream),
    );
    this.#proc = spawn(bin, ["-p", this.#dir, "-c", "sessiongate.conf", "-g", "daemon off;"], { stdio: "ignore" });
    const until = Date.now() + 10_000;
    for (;;) {
      const ok = await new Promise<boolean>((res) => {
        const s = connect(port, "127.0.0.1", () => (s.destroy(), res(true)));
        s.on("error", () => res(false));
      });
      if (ok) break;
      if (this.#proc.exitCode !== null || Date.now() > until) {
        await this.stop();
        throw new Error("nginx did not listen");
      }
      await sleep(20);
    }
    this.addr = `127.0.0.1:${port}`;
    return this;
  }

  async stop(): Promise<void> {
    const p = this.#proc;
    if (p && p.exitCode === null && p.signalCode === null) {
      const exited = new Promise<void>((res) => p.once("exit", () => res()));
      p.kill("SIGTERM");
      await exited;
    }
    rmSync(this.#dir, { recursive: true, force: true });
  }
}

describe("watch resume after a stream reset", () => {
  it("resumes a watch that nginx reset from its cursor, every event once, in order", async () => {
    const opened: number[] = [];
    let cutReady!: () => void;
    const ready = new Promise<void>((res) => (cutReady = res));
    const { addr, server } = await fakeGateway((call) => {
      const from = Number(call.request.fromEventSeq);
      const first = opened.length === 0;
      opened.push(from);
      for (let seq = from + 1; seq <= 10; seq++) {
        if (first && seq > 5) {
          cutReady(); // and leave the stream open: the relay cuts it
          return;
        }
        call.write(item(seq, 10));
      }
      call.end();
    });
    const proxy = await new CutProxy(addr).start();
    const nginx = await new Nginx().start(proxy.addr);
    try {
      using gw = new Gateway(nginx.addr);
      const seqs: number[] = [];
      for await (const it of gw.session("s1.test").watch("j1", { timeoutMs: 30_000 })) {
        seqs.push(it.eventSeq);
        if (it.eventSeq === 5) {
          await ready;
          proxy.cut();
        }
      }
      assert.deepEqual(seqs, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      assert.deepEqual(opened, [0, 5]);
    } finally {
      await nginx.stop();
      await proxy.close();
      server.forceShutdown();
    }
  });

  it("knows grpc-js's reset from the gateway's own INTERNAL", () => {
    const e = (message: string, reason?: string, code = 13) =>
      new GatewayError(code as never, message, reason ? { reason, domain: "sessiongate" } : {});
    assert.equal(streamReset(e("Received RST_STREAM with code 2")), true);
    assert.equal(streamReset(e("Received RST_STREAM with code 2 (Internal server error)")), true);
    assert.equal(streamReset(e("Received RST_STREAM with error code 2")), true);
    assert.equal(streamReset(e("stream terminated by RST_STREAM with error code: INTERNAL_ERROR")), true);
    assert.equal(streamReset(e("Received RST_STREAM with code 8")), false, "CANCEL is not a reset by a dead upstream");
    assert.equal(streamReset(e("Received RST_STREAM with code 20")), false);
    assert.equal(streamReset(e("Received RST_STREAM with code 2", "INTERNAL")), false, "the gateway's INTERNAL has ErrorInfo");
    assert.equal(streamReset(e("Received RST_STREAM with code 2", undefined, 2)), false, "UNKNOWN");
  });
});

/** A fake gateway whose first WatchJob sends 1…3 and fails with code and reason; later ones send the rest to 6. */
async function failOnce(code: grpc.status, reason: string, message: string) {
  const opened: number[] = [];
  const gwf = await fakeGateway((call) => {
    const from = Number(call.request.fromEventSeq);
    const first = opened.length === 0;
    opened.push(from);
    for (let seq = from + 1; seq <= 6; seq++) {
      if (first && seq === 4) {
        const st = create(StatusSchema, {
          code,
          message,
          details: [anyPack(ErrorInfoSchema, create(ErrorInfoSchema, { reason, domain: "sessiongate", metadata: { retryable: "true" } }))],
        });
        const md = new grpc.Metadata();
        md.set("grpc-status-details-bin", Buffer.from(toBinary(StatusSchema, st)));
        call.emit("error", Object.assign(new Error(message), { code, details: message, metadata: md }));
        return;
      }
      call.write(item(seq, 6));
    }
    call.end();
  });
  return { ...gwf, opened };
}

describe("watch resume on REPLICA_SILENT", () => {
  it("resumes a watch ended UNAVAILABLE REPLICA_SILENT", async () => {
    const f = await failOnce(grpc.status.UNAVAILABLE, "REPLICA_SILENT", "the replica is silent");
    try {
      using gw = new Gateway(f.addr, { retry: false });
      const seqs: number[] = [];
      for await (const it of gw.session("s1.test").watch("j1", { timeoutMs: 30_000 })) seqs.push(it.eventSeq);
      assert.deepEqual(seqs, [1, 2, 3, 4, 5, 6]);
      assert.deepEqual(f.opened, [0, 3]);
    } finally {
      f.server.forceShutdown();
    }
  });

  it("does not resume the gateway's own INTERNAL, whatever its text", async () => {
    const f = await failOnce(grpc.status.INTERNAL, "INTERNAL", "Received RST_STREAM with code 2");
    try {
      using gw = new Gateway(f.addr, { retry: false });
      await assert.rejects(
        (async () => {
          for await (const _ of gw.session("s1.test").watch("j1", { timeoutMs: 30_000 }));
        })(),
        (err: unknown) => err instanceof InternalError && err.reason === "INTERNAL",
      );
      assert.deepEqual(f.opened, [0]);
    } finally {
      f.server.forceShutdown();
    }
  });
});

/**
 * A fake gateway whose first RunJob sends its response header and then
 * waits (for the test to reset its connection); later attempts answer. With
 * internal, every attempt fails with the gateway's own INTERNAL (ErrorInfo)
 * in the reset's words.
 */
async function resetRun(internal: boolean) {
  const keys: string[] = [];
  const server = new grpc.Server();
  server.addService(
    {
      RunJob: runJobDef,
    } as grpc.ServiceDefinition,
    {
      RunJob: (call: grpc.ServerUnaryCall<RunJobRequest, unknown>, cb: grpc.sendUnaryData<unknown>) => {
        keys.push(call.request.idempotencyKey);
        if (internal) {
          const message = "Received RST_STREAM with code 2";
          const st = create(StatusSchema, {
            code: grpc.status.INTERNAL,
            message,
            details: [anyPack(ErrorInfoSchema, create(ErrorInfoSchema, { reason: "INTERNAL", domain: "sessiongate" }))],
          });
          const md = new grpc.Metadata();
          md.set("grpc-status-details-bin", Buffer.from(toBinary(StatusSchema, st)));
          return cb({ code: grpc.status.INTERNAL, details: message, metadata: md });
        }
        if (keys.length === 1) {
          const md = new grpc.Metadata();
          md.set("x-test", "early");
          call.sendMetadata(md); // and no answer: the relay cuts the call
          return;
        }
        cb(null, create(RunJobResponseSchema, { jobId: "j", result: { kind: { case: "stringValue", value: "ok" } } }));
      },
    },
  );
  const port = await new Promise<number>((res, rej) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? rej(err) : res(p))),
  );
  return { addr: `127.0.0.1:${port}`, server, keys };
}

describe("unary re-send after a stream reset", () => {
  it("sends a Run that nginx reset again, with the same idempotency key", async () => {
    const f = await resetRun(false);
    const proxy = await new CutProxy(f.addr).start();
    const nginx = await new Nginx().start(proxy.addr);
    // Reset once the client has the response header: nginx then resets the
    // stream (before it, nginx answers 502, an UNAVAILABLE).
    const header: grpc.Interceptor = (options, nextCall) =>
      new grpc.InterceptingCall(
        nextCall(options),
        new grpc.RequesterBuilder()
          .withStart((metadata, listener, next) =>
            next(
              metadata,
              new grpc.ListenerBuilder()
                .withOnReceiveMetadata((md, nxt) => {
                  if (md.get("x-test").length > 0) proxy.cut();
                  nxt(md);
                })
                .build(),
            ),
          )
          .build(),
      );
    try {
      using gw = new Gateway(nginx.addr, { interceptors: [header] });
      const res = await gw.session("s1.test").run("echo", 1, { timeoutMs: 20_000 });
      assert.equal(res.result, "ok");
      assert.equal(f.keys.length, 2, JSON.stringify(f.keys));
      assert.ok(f.keys[0]);
      assert.equal(f.keys[0], f.keys[1], "the re-send carries the call's idempotency key");
    } finally {
      await nginx.stop();
      await proxy.close();
      f.server.forceShutdown();
    }
  });

  it("does not send the gateway's own INTERNAL again", async () => {
    const f = await resetRun(true);
    try {
      using gw = new Gateway(f.addr);
      await assert.rejects(
        gw.session("s1.test").run("echo", 1, { timeoutMs: 20_000 }),
        (err: unknown) => err instanceof InternalError && err.reason === "INTERNAL",
      );
      assert.equal(f.keys.length, 1);
    } finally {
      f.server.forceShutdown();
    }
  });
});
