// A frozen gateway among the addresses of a target (the TypeScript client):
// the client's keepalive gives its connection up and the retry policy sends
// the call to another address, within seconds and not at its deadline.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { Gateway } from "../src/index.js";
import { GatewayProcess } from "./gateway.js";

// Keepalive gives a frozen connection up in about 1 s + 2 s; the margin is for
// a loaded machine. The calls' own timeout is far beyond it.
const BOUND_MS = 6_000;
const CALL_TIMEOUT_MS = 20_000;

describe("failover", () => {
  it("calls leave a frozen replica", async () => {
    const a = await new GatewayProcess().start();
    const b = await new GatewayProcess().start();
    const gw = new Gateway(`ipv4:${a.addr},${b.addr}`);
    try {
      for (let i = 0; i < 4; i++) await gw.listSessions({ timeoutMs: CALL_TIMEOUT_MS }); // both connections up
      a.signal("SIGSTOP");
      try {
        let slowest = 0;
        for (let i = 0; i < 6; i++) {
          // the round robin sends some to the frozen one
          const start = performance.now();
          await gw.listSessions({ timeoutMs: CALL_TIMEOUT_MS });
          slowest = Math.max(slowest, performance.now() - start);
        }
        assert.ok(slowest < BOUND_MS, `a call took ${slowest.toFixed(0)} ms with one of two replicas frozen`);
      } finally {
        a.signal("SIGCONT");
      }
    } finally {
      gw.close();
      await a.stop();
      await b.stop();
    }
  });
});
