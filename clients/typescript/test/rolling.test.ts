// The TypeScript client (its defaults, the cluster's three addresses) through
// a rolling SIGTERM restart of a real cluster (redis-server, the reference
// runtime, three replicas): RunJob loops on several sessions fail no call,
// and every result is the call's own.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { Gateway, GatewayError } from "../src/index.js";
import { ClusterProcess } from "./gateway.js";

const SESSIONS = 6;
const CALL_TIMEOUT_MS = 20_000;

describe("rolling restart", { timeout: 180_000 }, () => {
  it("RunJob loops fail no call through a rolling SIGTERM restart", async (t) => {
    if (!ClusterProcess.available()) {
      if (process.env.CI === "true") assert.fail("redis-server is not on PATH (CI=true: apt-get install -y redis-server)");
      t.skip("redis-server is not on PATH");
      return;
    }
    const cluster = await new ClusterProcess().start();
    const g = new Gateway(`ipv4:${cluster.replicas.map((r) => r.addr).join(",")}`);
    let stop = false;
    const failures: string[] = [];
    const lastOk: number[] = Array(SESSIONS).fill(0);
    let ok = 0;
    const loops: Promise<void>[] = [];
    try {
      const sessions = [];
      for (let i = 0; i < SESSIONS; i++) sessions.push(await g.openSession({ clientName: "ts-rolling" }, { timeoutMs: 10_000 }));
      for (let i = 0; i < SESSIONS; i++) {
        loops.push(
          (async () => {
            for (let n = 0; !stop; n++) {
              const token = `s${i}-${n}`;
              try {
                const r = await sessions[i].run("echo", { token }, { timeoutMs: CALL_TIMEOUT_MS });
                if ((r.result as { token?: string }).token !== token) failures.push(`session ${i}: sent ${token}, got ${JSON.stringify(r.result)}`);
                ok++;
                lastOk[i] = performance.now();
              } catch (err) {
                if (!(err instanceof GatewayError)) throw err;
                failures.push(`session ${i}: ${err.message}`);
                await new Promise((res) => setTimeout(res, 50));
              }
            }
          })(),
        );
      }
      let restarted = 0;
      for (let r = 0; r < cluster.replicas.length; r++) {
        await cluster.restart(r);
        restarted = performance.now();
        const deadline = restarted + 20_000;
        // every loop answered since the restart
        while (performance.now() < deadline && !lastOk.every((at) => at > restarted)) await new Promise((res) => setTimeout(res, 20));
      }
      stop = true;
      await Promise.all(loops);
      t.diagnostic(`rolling restart: ${ok} RunJob calls, ${failures.length} failed`);
      assert.deepEqual(failures, [], `${failures.length} failed calls (${ok} succeeded)`);
      assert.ok(lastOk.every((at) => at > restarted), "a loop made no progress after the last restart");
    } finally {
      stop = true;
      await Promise.allSettled(loops);
      g.close();
      await cluster.stop();
    }
  });
});
