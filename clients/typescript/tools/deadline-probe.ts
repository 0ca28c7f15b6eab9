// Deadline probe for the TypeScript client (run by cmd/deadline-probe).
//
// Makes N RunJob calls to the sleep agent, each sleeping a second longer than
// its own deadline, with deadlines spread evenly from 50 ms to 2 s (or N calls
// at each of --deadlines-ms; with --agent echo, echo calls whose in-time
// answers count as "ok"), C at a time, and prints one JSON line per retry
// setting and deadline: how many calls received
// the gateway's TimeoutExceeded details, how many a bare DEADLINE_EXCEEDED,
// how many CANCELLED ("rawCancelled" counts the CANCELLED that grpc-js
// reported after the deadline had passed, which the client surfaces as
// DEADLINE_EXCEEDED).
//
//   node clients/typescript/dist-test/tools/deadline-probe.js --addr HOST:PORT

import { monitorEventLoopDelay } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { status as Code } from "@grpc/grpc-js";

import { CancelledError, DeadlineExceededError, Gateway, GatewayError, TimeoutExceededError } from "../src/index.js";

async function probe(addr: string, n: number, conc: number, retry: boolean, deadlineMs: number, agent: string) {
  const counts = { details: 0, bare: 0, cancelled: 0, other: 0, ok: 0, rawCancelled: 0 };
  const limits: Record<string, number> = {};
  using gw = new Gateway(addr, { retry });
  await using s = await gw.openSession({ clientName: "deadline-probe" }, { timeoutMs: 10_000 });
  const deadlines = Array.from({ length: n }, (_, i) =>
    deadlineMs > 0 ? deadlineMs : Math.round(50 + ((2000 - 50) * i) / Math.max(n - 1, 1)),
  );
  // How long the event loop was stalled (blocked, or the process not
  // scheduled), sampled every 10 ms: the stalls a deadline's timer must
  // outlast for the details to be read first.
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  const start = performance.now();
  let next = 0;
  const worker = async () => {
    while (next < deadlines.length) {
      const ms = deadlines[next++];
      try {
        if (agent === "echo") await s.run("echo", { deadline: ms }, { timeoutMs: ms });
        else await s.run("sleep", { ms: ms + 1000 }, { timeoutMs: ms });
        counts.ok++;
      } catch (e) {
        if (e instanceof TimeoutExceededError) {
          counts.details++;
          limits[e.limit] = (limits[e.limit] ?? 0) + 1;
        } else if (e instanceof DeadlineExceededError) {
          counts.bare++;
          if (e.grpcCode === Code.CANCELLED) counts.rawCancelled++;
        } else if (e instanceof CancelledError) {
          counts.cancelled++;
        } else if (e instanceof GatewayError) {
          counts.other++;
        } else {
          throw e;
        }
      }
    }
  };
  await Promise.all(Array.from({ length: conc }, worker));
  const seconds = Math.round((performance.now() - start) / 100) / 10;
  loop.disable();
  const ms = (ns: number) => Math.round(ns / 1e5) / 10;
  const stall = { loop_p99_ms: ms(loop.percentile(99)), loop_max_ms: ms(loop.max) };
  return { lang: "node", retry, deadline_ms: deadlineMs, agent, n, ...counts, limits, seconds, ...stall };
}

const { values } = parseArgs({
  options: {
    addr: { type: "string" },
    n: { type: "string", default: "200" },
    c: { type: "string", default: "20" },
    retry: { type: "string", default: "both" },
    "deadlines-ms": { type: "string", default: "" },
    agent: { type: "string", default: "sleep" },
  },
});
if (!values.addr) throw new Error("--addr is required");
const settings = ({ on: [true], off: [false], both: [true, false] } as Record<string, boolean[]>)[values.retry!];
const fixed = values["deadlines-ms"]!.split(",").filter((x) => x !== "").map(Number);
for (const retry of settings) {
  for (const d of fixed.length > 0 ? fixed : [0]) {
    console.log(JSON.stringify(await probe(values.addr, Number(values.n), Number(values.c), retry, d, values.agent!)));
  }
}
