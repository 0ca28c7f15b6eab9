// The hand-written client over the generated code in ./gen (protoc-gen-es)
// and @grpc/grpc-js.

import {
  create,
  fromBinary,
  toBinary,
  type DescMessage,
  type DescMethod,
  type DescMethodServerStreaming,
  type DescMethodUnary,
  type MessageInitShape,
  type MessageShape,
} from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate, type Timestamp, type Value } from "@bufbuild/protobuf/wkt";
import * as grpc from "@grpc/grpc-js";
import { setTimeout as sleep } from "node:timers/promises";

import { ClientClosedError, DeadlineExceededError, fromServiceError, GatewayError } from "./errors.js";
import { checkedDepth } from "./depth.js";
import { OwnDeadline } from "./deadline.js";
import { callKey } from "./idempotency.js";
import { withReceiveLimit } from "./limits.js";
import { retryServiceConfig } from "./gen/retry_service_config.js";
import {
  JobState as PbJobState,
  SessionGateway,
  SessionPhase as PbPhase,
  SessionStatus as PbStatus,
  type Job as PbJob,
  type Lease as PbLease,
  type LeaseConstraints as PbLeaseConstraints,
  type OpenSessionResponse,
  type WatchJobResponse,
} from "./gen/sessiongate/v1/sessiongate_pb.js";
import { MAX_RESET_RESENDS, resendSafe, resetBackoffMs, Resumer, streamReset, type ResumePolicy } from "./resume.js";
import { HEALTH_CHECK_PATH, replicaSilentError, silenceBound, StreamSilence, type SilenceBound } from "./silence.js";
import { fromRawOrValue, toValue, type JsonValue } from "./values.js";

/** Request metadata asking the gateway for a timeout, in milliseconds. */
export const TIMEOUT_METADATA_KEY = "x-timeout-ms";
/**
 * Request metadata naming the session of a session-scoped call, for
 * session-affine routing; the gateway checks it against the request body.
 */
export const SESSION_METADATA_KEY = "x-sessiongate-session";
/**
 * Request metadata carrying the caller's W3C trace context; the gateway makes
 * its trace id the trace id of the jobs the call submits.
 */
export const TRACEPARENT_METADATA_KEY = "traceparent";

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/** Whether tp is a W3C traceparent the gateway would take (not one it ignores). */
export function isTraceparent(tp: string): boolean {
  const m = TRACEPARENT.exec(tp);
  return (
    m !== null &&
    m[1] !== "ff" &&
    !(m[1] === "00" && m[5] !== undefined) &&
    !/^0+$/.test(m[2]!) &&
    !/^0+$/.test(m[3]!)
  );
}

/** Options of every call. */
export interface CallOptions {
  /**
   * The call's deadline, in milliseconds from now. It is also sent to the
   * gateway as x-timeout-ms, so the gateway ends the call a margin before the
   * deadline — a third of the time left, at most 100 ms — with the timeout
   * details: you get a TimeoutExceededError rather than a bare deadline. A call
   * with any time left runs; only one already past its deadline is refused.
   * Without it (and without serverTimeoutMs) the method's timeout profile
   * applies. The client keeps the deadline itself (src/deadline.ts): it
   * counts from when the request leaves, as the gateway counts from its
   * arrival, and reads what has arrived before it gives up, so a call ends
   * at most one event-loop turn after timeoutMs plus the time the process
   * took to send the request.
   */
  timeoutMs?: number;
  /**
   * A budget asked of the gateway (x-timeout-ms) in place of timeoutMs, e.g.
   * a short server budget under a long deadline. The gateway clamps it to the
   * profile's bounds (RunJob runs under tool_call: 1 s to 1 h) and never
   * extends the deadline.
   */
  serverTimeoutMs?: number;
  /** Cancels the call when aborted. */
  signal?: AbortSignal;
  /**
   * The caller's W3C trace context ("00-<trace id>-<parent id>-<flags>"),
   * sent as traceparent metadata: a job the call submits gets its trace id
   * (answers carry it as traceId). With OpenTelemetry, take it from
   * `propagation.inject(context.active(), carrier)`. A malformed one is
   * refused with a TypeError (the gateway would ignore it).
   */
  traceparent?: string;
}

/** A set of capability grants (ARCP §9): namespace ("fs.read", "cost.budget", …) to patterns. */
export type Lease = Record<string, string[]>;

/** Options of run and submit. */
export interface JobOptions extends CallOptions {
  /**
   * A repeated submit with the same key and input returns the same job. Without
   * it each run or submit call gets a fresh random key, the same for all of the
   * call's retried attempts.
   */
  idempotencyKey?: string;
  /** A runtime-side limit on the job's duration, in seconds. */
  maxRuntimeSec?: number;
  /** Runs this version of the agent (the agent name then names none). */
  agentVersion?: string;
  /** Capabilities requested; beyond the runtime's limits the call rejects with PermissionDeniedError. */
  lease?: Lease;
  /** When the lease ends (in the future): a job still running then fails with LEASE_EXPIRED. */
  leaseExpiresAt?: Date;
  /** Vendor extensions ("x-vendor.*" keys, JSON values) put on the submit envelope. */
  extensions?: Record<string, unknown>;
}

/** Options of listJobs. */
export interface ListJobsOptions extends CallOptions {
  /** Jobs per page (default 50, at most 1000); each page is one call. */
  pageSize?: number;
}

/** Options of subscribe. */
export interface SubscribeOptions extends CallOptions {
  /** Replay the job's buffered events before live ones. */
  history?: boolean;
  /** With history: replay only events after this seq (in the submitting session's numbering). */
  fromEventSeq?: bigint | number;
}

/** Options of watch. */
export interface WatchOptions extends CallOptions {
  /**
   * Deliver only items with eventSeq greater than this (0 = from the start).
   * Default: a Job's afterEventSeq (the same events as from 0), else 0.
   */
  fromEventSeq?: bigint | number;
  /**
   * Re-open the watch from the last eventSeq delivered when the stream is
   * cut by a hand-off, an unreachable owner, a draining gateway or a dropped
   * connection (UNAVAILABLE), with backoff, within timeoutMs (which bounds
   * the whole watch): every event arrives once, in order. Default true;
   * false turns it off; a ResumePolicy tunes it.
   */
  resume?: boolean | ResumePolicy;
}

/**
 * Keepalive while calls are in flight, unless channelOptions set their own: a
 * PING every second, and a connection whose PING is unanswered for two
 * seconds is closed, so that a call on a frozen replica (SIGSTOP, a VM pause:
 * its socket stays open, nothing comes back) fails UNAVAILABLE in about three
 * seconds and the retry policy sends it to another address of the target. The
 * gateway tolerates pings every 500 ms (--keepalive-min-time).
 */
const KEEPALIVE_OPTIONS: grpc.ChannelOptions = {
  "grpc.keepalive_time_ms": 1000,
  "grpc.keepalive_timeout_ms": 2000,
  "grpc.keepalive_permit_without_calls": 0,
};

/** Options of the Gateway. */
export interface GatewayOptions {
  /** Channel credentials; insecure (plaintext) by default. */
  credentials?: grpc.ChannelCredentials;
  /** A caller token, sent as "authorization: Bearer <token>". */
  token?: string;
  /**
   * Apply the published retry policy (retryServiceConfig); default true. The
   * gateway's timeout answers are never retried (every one carries
   * grpc-retry-pushback-ms: -1), and every attempt of one run or submit
   * carries the same idempotency key (a fresh one per call unless
   * idempotencyKey gives one), so a retried attempt gets the job the first
   * one created instead of running it again (see README, "Retries").
   */
  retry?: boolean;
  /**
   * How calls are spread over the target's addresses: "round_robin" (the
   * default: a call retried after a frozen or draining replica goes to
   * another one) or "pick_first" (one connection carries every call).
   */
  loadBalancing?: "round_robin" | "pick_first";
  /** More grpc-js channel options. */
  channelOptions?: grpc.ChannelOptions;
  /** grpc-js client interceptors, run on every call (e.g. for tracing). */
  interceptors?: grpc.Interceptor[];
  /**
   * The silence bound of watches (default on, 500 ms and 1000 ms): a watch
   * stream quiet for afterMs health-checks its replica, and one that gets no
   * answer within timeoutMs ends UNAVAILABLE REPLICA_SILENT and the watch
   * resumes from its cursor (see silence.ts). false turns it off.
   */
  silenceBound?: SilenceBound | false;
}

/** What openSession sends. */
export interface OpenSessionParams {
  /** Configured runtime name; empty selects the default runtime. */
  runtime?: string;
  /** Name of the calling application. */
  clientName?: string;
  /** ARCP features requested; empty requests the gateway's default set. */
  features?: string[];
  /** Bearer token presented to the runtime; empty uses the configured one. */
  upstreamToken?: string;
}

/** A session's liveness, spelt as the HTTP probe spells it. */
export type Liveness = "unspecified" | "live" | "not_found";
/** Where a live session's upstream connection stands. */
export type Phase = "unspecified" | "ready" | "reconnecting" | "closing";

/**
 * The answer of the liveness probe. uint64 fields are numbers (exact up to
 * 2^53, far beyond any seq or generation), so results serialise with
 * JSON.stringify.
 */
export interface SessionStatus {
  status: Liveness;
  phase: Phase;
  runtime: string;
  features: string[];
  lastEventSeq: number;
  generation: number;
  instanceId: string;
}

/** One of the caller's sessions. */
export interface SessionInfo {
  sessionId: string;
  phase: Phase;
  runtime: string;
  openedAt?: Date;
  activeJobs: number;
}

/** What the runtime said of a job it accepted. */
export interface Grant {
  /** The resolved agent, "name@version", when the runtime says. */
  agent: string;
  /** The job's W3C trace id: the caller's traceparent's, or a fresh one. */
  traceId: string;
  /** The lease granted, if any. */
  lease?: Lease;
  /** When the lease ends, if it does. */
  leaseExpiresAt?: Date;
  /** Initial budget per currency, when the lease has cost.budget. */
  budget: Record<string, number>;
}

/** A successful job's result, from run. */
export interface RunResult extends Grant {
  jobId: string;
  result: JsonValue;
  summary: string;
  /** Set when the result was streamed in chunks (result is then the assembled result). */
  resultId: string;
  /** The streamed result's size in bytes. */
  resultSize: number;
  /** Vendor extensions of the result envelope. */
  extensions: Record<string, JsonValue>;
}

/** A job the runtime accepted, from submit. */
export interface Job extends Grant {
  jobId: string;
  acceptedAt?: Date;
  /** Vendor extensions of the job.accepted envelope. */
  extensions: Record<string, JsonValue>;
  /**
   * Every event of the job has an eventSeq above this one (0 when the
   * gateway cannot say). watch(job) starts from it: the same events as from
   * 0, and a watch cut before its first event (a rolling restart) continues
   * on the replica that took the session over.
   */
  afterEventSeq: number;
}

/** Where a job stands. */
export type JobState = "unspecified" | "pending" | "running" | "succeeded" | "failed" | "cancelled" | "timed_out";

/** A job as the runtime describes it, from listJobs and subscribe. */
export interface JobInfo {
  jobId: string;
  /** The resolved agent, "name@version". */
  agent: string;
  state: JobState;
  /** The runtime's status string as sent. */
  rawStatus: string;
  lease?: Lease;
  leaseExpiresAt?: Date;
  budget: Record<string, number>;
  parentJobId: string;
  createdAt?: Date;
  traceId: string;
  lastEventSeq: number;
}

/** The answer of subscribe. */
export interface Subscription {
  job: JobInfo;
  /** The event_seq the subscription starts from, when the runtime says. */
  subscribedFrom: number;
  /** Whether buffered history was replayed. */
  replayed: boolean;
}

/** A typed progress report; total is undefined when indeterminate. */
export interface Progress {
  current: number;
  total?: number;
  units: string;
  message: string;
}

/** The metadata of one chunk of a streamed result; the data is the event's body. */
export interface ResultChunk {
  resultId: string;
  chunkSeq: number;
  /** "utf8" or "base64". */
  encoding: string;
  more: boolean;
}

/** One item of a watched job; the last is a "result" or an "error". */
export type WatchItem = (
  | {
      type: "event";
      eventSeq: number;
      kind: string;
      ts?: Date;
      body: JsonValue;
      /** Set for kind "progress". */
      progress?: Progress;
      /** Set for kind "result_chunk". */
      resultChunk?: ResultChunk;
    }
  | { type: "result"; eventSeq: number; result: JsonValue; summary: string; resultId: string; resultSize: number }
  | {
      type: "error";
      eventSeq: number;
      /** "error", "cancelled" or "timed_out". */
      finalStatus: string;
      /** The ARCP error code, e.g. "CANCELLED". */
      code: string;
      message: string;
      retryable: boolean;
      details: JsonValue;
    }
) & {
  /** Vendor extensions of the item's envelope. */
  extensions: Record<string, JsonValue>;
};

const liveness = (s: PbStatus): Liveness =>
  (({ [PbStatus.LIVE]: "live", [PbStatus.NOT_FOUND]: "not_found" }) as Record<number, Liveness>)[s] ?? "unspecified";
const phase = (p: PbPhase): Phase =>
  (({ [PbPhase.READY]: "ready", [PbPhase.RECONNECTING]: "reconnecting", [PbPhase.CLOSING]: "closing" }) as Record<
    number,
    Phase
  >)[p] ?? "unspecified";
const date = (t: Timestamp | undefined): Date | undefined => (t ? timestampDate(t) : undefined);
/** A uint64 as a number: exact up to 2^53 (seqs, sizes and generations stay far below). */
const u64 = (v: bigint): number => Number(v);
const jobStates: Record<number, JobState> = {
  [PbJobState.PENDING]: "pending",
  [PbJobState.RUNNING]: "running",
  [PbJobState.SUCCEEDED]: "succeeded",
  [PbJobState.FAILED]: "failed",
  [PbJobState.CANCELLED]: "cancelled",
  [PbJobState.TIMED_OUT]: "timed_out",
};
const leaseOut = (l: PbLease | undefined): Lease | undefined =>
  l && Object.keys(l.capabilities).length > 0
    ? Object.fromEntries(Object.entries(l.capabilities).map(([ns, p]) => [ns, p.patterns]))
    : undefined;
const expiresOut = (c: PbLeaseConstraints | undefined): Date | undefined => date(c?.expiresAt);
const extOut = (ext: { [key: string]: Value }): Record<string, JsonValue> =>
  Object.fromEntries(Object.entries(ext).map(([k, v]) => [k, fromRawOrValue(new Uint8Array(), v)]));
const grant = (r: {
  agent: string;
  traceId: string;
  lease?: PbLease;
  leaseConstraints?: PbLeaseConstraints;
  budget: { [key: string]: number };
}): Grant => ({
  agent: r.agent,
  traceId: r.traceId,
  lease: leaseOut(r.lease),
  leaseExpiresAt: expiresOut(r.leaseConstraints),
  budget: { ...r.budget },
});
const jobInfo = (j: PbJob | undefined): JobInfo => ({
  jobId: j?.jobId ?? "",
  agent: j?.agent ?? "",
  state: jobStates[j?.state ?? 0] ?? "unspecified",
  rawStatus: j?.rawStatus ?? "",
  lease: leaseOut(j?.lease),
  leaseExpiresAt: expiresOut(j?.leaseConstraints),
  budget: { ...j?.budget },
  parentJobId: j?.parentJobId ?? "",
  createdAt: date(j?.createTime),
  traceId: j?.traceId ?? "",
  lastEventSeq: u64(j?.lastEventSeq ?? 0n),
});

function jobExtras(o: JobOptions) {
  if (o.leaseExpiresAt !== undefined && !(o.leaseExpiresAt instanceof Date && Number.isFinite(o.leaseExpiresAt.getTime()))) {
    throw new TypeError("leaseExpiresAt must be a valid Date");
  }
  return {
    agentVersion: o.agentVersion,
    leaseRequest: o.lease
      ? { capabilities: Object.fromEntries(Object.entries(o.lease).map(([ns, patterns]) => [ns, { patterns }])) }
      : undefined,
    leaseConstraints: o.leaseExpiresAt ? { expiresAt: timestampFromDate(o.leaseExpiresAt) } : undefined,
    extensions: o.extensions
      ? Object.fromEntries(Object.entries(o.extensions).map(([k, v]) => [k, toValue(v)]))
      : undefined,
  };
}
const path = (m: DescMethod): string => `/${m.parent.typeName}/${m.name}`;

/** A slack for telling "the deadline had passed" on the client's clock. */
const DEADLINE_SLACK_MS = 10;

/** The error of a call ended by its own deadline (OwnDeadline) before any answer arrived. */
function ownDeadlineError(timeoutMs: number): GatewayError {
  return new DeadlineExceededError(grpc.status.DEADLINE_EXCEEDED, `deadline exceeded: no answer within ${timeoutMs} ms`);
}

function abortError(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new DOMException("The call was aborted", "AbortError");
}

function checkMs(name: string, v: number | undefined): void {
  if (v !== undefined && !(Number.isFinite(v) && v > 0)) {
    throw new RangeError(`${name} must be a positive number of milliseconds`);
  }
}

/**
 * A connection to a sessiongate gateway. One Gateway may serve any number of
 * concurrent calls and sessions; close it (or `using gw = …`) when done.
 */
export class Gateway implements Disposable {
  readonly #client: grpc.Client;
  readonly #auth?: string;
  readonly #silence?: Required<SilenceBound>;
  #closed = false;

  constructor(target: string, opts: GatewayOptions = {}) {
    const channelOptions: grpc.ChannelOptions = { ...KEEPALIVE_OPTIONS, ...withReceiveLimit({ ...opts.channelOptions }) };
    // Round robin over every address of the target (e.g.
    // "ipv4:10.0.0.1:50051,10.0.0.2:50051"), so that a call retried after a
    // frozen replica goes to another one.
    const roundRobin = { loadBalancingConfig: [{ [opts.loadBalancing ?? "round_robin"]: {} }] };
    if (opts.retry ?? true) {
      channelOptions["grpc.service_config"] = JSON.stringify({ ...retryServiceConfig, ...roundRobin });
      channelOptions["grpc.enable_retries"] = 1;
    } else {
      channelOptions["grpc.service_config"] = JSON.stringify(roundRobin);
      channelOptions["grpc.enable_retries"] = 0;
    }
    this.#client = new grpc.Client(target, opts.credentials ?? grpc.credentials.createInsecure(), {
      ...channelOptions,
      interceptors: opts.interceptors,
    });
    this.#auth = opts.token ? `Bearer ${opts.token}` : undefined;
    this.#silence = opts.silenceBound === false ? undefined : silenceBound(opts.silenceBound ?? {});
  }

  /** Health-checks the replica of sessionId (the session header routes it where a balancer routes the session). */
  #healthCheck(sessionId: string | undefined, timeoutMs: number, done: (silent: boolean) => void): { cancel(): void } {
    const call = this.#client.makeUnaryRequest(
      HEALTH_CHECK_PATH,
      (b: Buffer) => b,
      (b: Buffer) => b,
      Buffer.alloc(0),
      this.#metadata({}, sessionId),
      { deadline: Date.now() + timeoutMs },
      (err) => done(err?.code === grpc.status.DEADLINE_EXCEEDED),
    );
    return { cancel: () => call.cancel() };
  }

  #metadata(o: CallOptions, sessionId: string | undefined): grpc.Metadata {
    checkMs("timeoutMs", o.timeoutMs);
    checkMs("serverTimeoutMs", o.serverTimeoutMs);
    const md = new grpc.Metadata();
    if (this.#auth) md.set("authorization", this.#auth);
    const ms = o.serverTimeoutMs ?? o.timeoutMs;
    if (ms !== undefined) md.set(TIMEOUT_METADATA_KEY, String(Math.ceil(ms)));
    if (sessionId !== undefined) md.set(SESSION_METADATA_KEY, sessionId);
    if (o.traceparent !== undefined) {
      if (!isTraceparent(o.traceparent)) throw new TypeError(`not a W3C traceparent: ${JSON.stringify(o.traceparent)}`);
      md.set(TRACEPARENT_METADATA_KEY, o.traceparent);
    }
    return md;
  }

  /** @internal */
  async unary<I extends DescMessage, O extends DescMessage>(
    method: DescMethodUnary<I, O>,
    req: MessageInitShape<I>,
    o: CallOptions,
    sessionId?: string,
  ): Promise<MessageShape<O>> {
    // A call whose stream a balancer reset (its replica died mid-response)
    // is sent again when that is safe (see resume.ts, resendSafe).
    const start = Date.now();
    for (let attempt = 0; ; attempt++) {
      const left = o.timeoutMs === undefined ? undefined : Math.max(1, o.timeoutMs - (Date.now() - start));
      try {
        return await this.#unaryOnce(method, req, attempt === 0 ? o : { ...o, timeoutMs: left }, sessionId);
      } catch (err) {
        const pause = resetBackoffMs(attempt);
        if (
          attempt >= MAX_RESET_RESENDS ||
          !streamReset(err) ||
          !resendSafe(method.name, req) ||
          (o.timeoutMs !== undefined && Date.now() + pause >= start + o.timeoutMs)
        ) {
          throw err;
        }
        try {
          await sleep(pause, undefined, { signal: o.signal });
        } catch {
          throw o.signal ? abortError(o.signal) : err;
        }
      }
    }
  }

  #unaryOnce<I extends DescMessage, O extends DescMessage>(
    method: DescMethodUnary<I, O>,
    req: MessageInitShape<I>,
    o: CallOptions,
    sessionId?: string,
  ): Promise<MessageShape<O>> {
    return new Promise((resolve, reject) => {
      const md = this.#metadata(o, sessionId);
      if (o.signal?.aborted) return reject(abortError(o.signal));
      if (this.#closed) return reject(new ClientClosedError());
      const deadline = o.timeoutMs !== undefined ? Date.now() + o.timeoutMs : undefined;
      const onAbort = () => call.cancel();
      // The deadline is kept by OwnDeadline, not grpc-js: see deadline.ts.
      const own = o.timeoutMs !== undefined ? new OwnDeadline(o.timeoutMs, () => call.cancel()) : undefined;
      const call = this.#client.makeUnaryRequest(
        path(method),
        (m: MessageShape<I>) => Buffer.from(toBinary(method.input, m)),
        (b: Buffer) => fromBinary(method.output, b),
        create(method.input, req),
        md,
        own ? { credentials: own.credentials } : {},
        (err, res) => {
          own?.done();
          o.signal?.removeEventListener("abort", onAbort);
          if (err) {
            if (o.signal?.aborted) return reject(abortError(o.signal));
            if (own?.expired && err.code === grpc.status.CANCELLED) return reject(ownDeadlineError(o.timeoutMs!));
            const passed = deadline !== undefined && Date.now() >= deadline - DEADLINE_SLACK_MS;
            return reject(fromServiceError(err, passed));
          }
          resolve(res as MessageShape<O>);
        },
      );
      o.signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  /** @internal */
  async *serverStream<I extends DescMessage, O extends DescMessage>(
    method: DescMethodServerStreaming<I, O>,
    req: MessageInitShape<I>,
    o: CallOptions,
    sessionId?: string,
    bounded = false,
  ): AsyncGenerator<MessageShape<O>, void, undefined> {
    const md = this.#metadata(o, sessionId);
    if (o.signal?.aborted) throw abortError(o.signal);
    if (this.#closed) throw new ClientClosedError();
    const deadline = o.timeoutMs !== undefined ? Date.now() + o.timeoutMs : undefined;
    // The deadline is kept by OwnDeadline, not grpc-js: see deadline.ts.
    const own = o.timeoutMs !== undefined ? new OwnDeadline(o.timeoutMs, () => call.cancel()) : undefined;
    const call = this.#client.makeServerStreamRequest(
      path(method),
      (m: MessageShape<I>) => Buffer.from(toBinary(method.input, m)),
      (b: Buffer) => fromBinary(method.output, b),
      create(method.input, req),
      md,
      own ? { credentials: own.credentials } : {},
    );
    const onAbort = () => call.cancel();
    o.signal?.addEventListener("abort", onAbort, { once: true });
    const bound = bounded ? this.#silence : undefined;
    const silence = bound
      ? new StreamSilence(bound, (done) => this.#healthCheck(sessionId, bound.timeoutMs, done), () => call.cancel())
      : undefined;
    try {
      for await (const m of call) {
        silence?.received();
        yield m as MessageShape<O>;
      }
    } catch (err) {
      if (o.signal?.aborted) throw abortError(o.signal);
      if (silence?.silent) throw replicaSilentError(bound!);
      if (err instanceof Error && "code" in err && "metadata" in err) {
        if (own?.expired && (err as grpc.ServiceError).code === grpc.status.CANCELLED) throw ownDeadlineError(o.timeoutMs!);
        const passed = deadline !== undefined && Date.now() >= deadline - DEADLINE_SLACK_MS;
        throw fromServiceError(err as grpc.ServiceError, passed);
      }
      throw err;
    } finally {
      silence?.stop();
      own?.done();
      o.signal?.removeEventListener("abort", onAbort);
      call.cancel(); // a no-op once the stream has ended; ends it on break
    }
  }

  /** Opens a session; close it with `await using` or session.close(). */
  async openSession(params: OpenSessionParams = {}, o: CallOptions = {}): Promise<Session> {
    const r = await this.unary(SessionGateway.method.openSession, params, o);
    return new Session(this, r.sessionId, r);
  }

  /** A handle on an existing session, e.g. one opened elsewhere. Nothing is sent until it is used. */
  session(sessionId: string): Session {
    return new Session(this, sessionId);
  }

  /** Probes a session's liveness (side-effect free). */
  async status(sessionId: string, o: CallOptions = {}): Promise<SessionStatus> {
    const r = await this.unary(SessionGateway.method.getSessionStatus, { sessionId }, o, sessionId);
    return {
      status: liveness(r.status),
      phase: phase(r.phase),
      runtime: r.runtime,
      features: r.features,
      lastEventSeq: u64(r.lastEventSeq),
      generation: u64(r.generation),
      instanceId: r.instanceId,
    };
  }

  /** The caller's sessions, oldest first. */
  async listSessions(o: CallOptions = {}): Promise<SessionInfo[]> {
    const r = await this.unary(SessionGateway.method.listSessions, {}, o);
    return r.sessions.map((s) => ({
      sessionId: s.sessionId,
      phase: phase(s.phase),
      runtime: s.runtime,
      openedAt: date(s.openedAt),
      activeJobs: s.activeJobs,
    }));
  }

  /**
   * Closes the channel. Idempotent. Calls made afterwards (a watch's
   * re-opening too) reject with ClientClosedError without sending anything;
   * calls already under way run to their end.
   */
  close(): void {
    this.#closed = true;
    this.#client.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

/**
 * A session on a runtime. Every call names it in the x-sessiongate-session
 * metadata. Close it with `await using s = await gw.openSession()` or
 * `await s.close()`.
 */
export class Session implements AsyncDisposable {
  readonly #gw: Gateway;
  #closed = false;
  /** The session id. */
  readonly id: string;
  /** Features in effect (empty for a handle from gateway.session). */
  readonly features: string[];
  /** Agents the runtime offers: name → versions. */
  readonly agents: Record<string, string[]>;
  /** The configured runtime name. */
  readonly runtime: string;
  /** The id of the gateway instance that owns the session. */
  readonly instanceId: string;

  /** @internal */
  constructor(gw: Gateway, id: string, opened?: OpenSessionResponse) {
    this.#gw = gw;
    this.id = id;
    this.features = opened?.features ?? [];
    this.agents = Object.fromEntries((opened?.agents ?? []).map((a) => [a.name, a.versions]));
    this.runtime = opened?.runtime?.name ?? "";
    this.instanceId = opened?.instanceId ?? "";
  }

  /** Runs a job and waits for its result; a failed job rejects with the GatewayError for its code. */
  async run(agent: string, input?: unknown, o: JobOptions = {}): Promise<RunResult> {
    const r = await this.#gw.unary(
      SessionGateway.method.runJob,
      {
        sessionId: this.id,
        agent,
        input: input === undefined ? undefined : toValue(checkedDepth(input)),
        idempotencyKey: callKey(o.idempotencyKey),
        maxRuntimeSec: o.maxRuntimeSec,
        ...jobExtras(o),
      },
      o,
      this.id,
    );
    return {
      jobId: r.jobId,
      result: fromRawOrValue(r.rawResult, r.result),
      summary: r.summary,
      ...grant(r),
      resultId: r.resultId,
      resultSize: u64(r.resultSize),
      extensions: extOut(r.extensions),
    };
  }

  /** Submits a job; resolves once the runtime accepted it. */
  async submit(agent: string, input?: unknown, o: JobOptions = {}): Promise<Job> {
    const r = await this.#gw.unary(
      SessionGateway.method.submitJob,
      {
        sessionId: this.id,
        agent,
        input: input === undefined ? undefined : toValue(checkedDepth(input)),
        idempotencyKey: callKey(o.idempotencyKey),
        maxRuntimeSec: o.maxRuntimeSec,
        ...jobExtras(o),
      },
      o,
      this.id,
    );
    return {
      jobId: r.jobId,
      acceptedAt: date(r.acceptedAt),
      ...grant(r),
      extensions: extOut(r.extensions),
      afterEventSeq: u64(r.afterEventSeq),
    };
  }

  /**
   * Lists the jobs the runtime reports for this session, in acceptance
   * order, a page (one call) at a time as the loop goes on. filter is an
   * AIP-160 filter, e.g. `(state = PENDING OR state = RUNNING) AND agent = "echo"`;
   * a bad one rejects with InvalidArgumentError.
   */
  async *listJobs(filter = "", o: ListJobsOptions = {}): AsyncGenerator<JobInfo, void, undefined> {
    let pageToken = "";
    do {
      const r = await this.#gw.unary(
        SessionGateway.method.listJobs,
        { sessionId: this.id, filter, pageSize: o.pageSize, pageToken },
        o,
        this.id,
      );
      for (const j of r.jobs) yield jobInfo(j);
      pageToken = r.nextPageToken;
    } while (pageToken !== "");
  }

  /**
   * Attaches this session to a job submitted through another of the caller's
   * sessions; watch then works for it here. A subscriber cannot cancel the
   * job (PermissionDeniedError).
   */
  async subscribe(job: string | Job, o: SubscribeOptions = {}): Promise<Subscription> {
    const jobId = typeof job === "string" ? job : job.jobId;
    const r = await this.#gw.unary(
      SessionGateway.method.subscribeJob,
      { sessionId: this.id, jobId, history: o.history ?? false, fromEventSeq: BigInt(o.fromEventSeq ?? 0) },
      o,
      this.id,
    );
    return { job: jobInfo(r.job), subscribedFrom: u64(r.subscribedFrom), replayed: r.replayed };
  }

  /**
   * Streams a job's items, ending with its result or error. Leaving the
   * `for await` loop early ends the stream (the job goes on; see cancel).
   * A cut stream is re-opened from the last item delivered (see
   * WatchOptions.resume): every item arrives once, in order.
   */
  async *watch(job: string | Job, o: WatchOptions = {}): AsyncGenerator<WatchItem, void, undefined> {
    const jobId = typeof job === "string" ? job : job.jobId;
    checkMs("timeoutMs", o.timeoutMs);
    const deadline = o.timeoutMs !== undefined ? Date.now() + o.timeoutMs : undefined;
    const policy = o.resume === false ? undefined : o.resume === true || o.resume === undefined ? {} : o.resume;
    const from = o.fromEventSeq ?? (typeof job === "string" ? 0 : job.afterEventSeq);
    const r = new Resumer(Number(from), policy, deadline);
    for (let first = true; ; first = false) {
      const req = { sessionId: this.id, jobId, fromEventSeq: BigInt(r.cursor) };
      const co = first ? o : { ...o, timeoutMs: r.remaining(Date.now()) };
      try {
        for await (const m of this.#gw.serverStream(SessionGateway.method.watchJob, req, co, this.id, true)) {
          if (r.deliver(u64(m.eventSeq), m.item.case !== "event")) yield item(m);
          if (r.done) return;
        }
        return;
      } catch (err) {
        if (o.signal?.aborted) throw err;
        const delay = r.cut(err, Date.now());
        if (delay === undefined) throw err;
        try {
          await sleep(delay, undefined, { signal: o.signal });
        } catch {
          throw o.signal ? abortError(o.signal) : err;
        }
      }
    }
  }

  /** Asks the runtime to cancel a job; the job then ends with a CANCELLED error. */
  async cancel(job: string | Job, reason = "", o: CallOptions = {}): Promise<void> {
    const jobId = typeof job === "string" ? job : job.jobId;
    await this.#gw.unary(SessionGateway.method.cancelJob, { sessionId: this.id, jobId, reason }, o, this.id);
  }

  /** Probes this session's liveness. */
  status(o: CallOptions = {}): Promise<SessionStatus> {
    return this.#gw.status(this.id, o);
  }

  /** Closes the session upstream. Idempotent; a session the gateway no longer knows counts as closed. */
  async close(reason = "", o: CallOptions = {}): Promise<void> {
    if (this.#closed) return;
    try {
      await this.#gw.unary(SessionGateway.method.closeSession, { sessionId: this.id, reason }, o, this.id);
    } catch (err) {
      if (!(err instanceof GatewayError && err.reason === "SESSION_NOT_FOUND")) throw err;
    }
    this.#closed = true;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

function item(m: WatchJobResponse): WatchItem {
  const it = m.item;
  const extensions = extOut(m.extensions);
  switch (it.case) {
    case "event": {
      const e = it.value;
      const p = e.progress;
      const c = e.resultChunk;
      return {
        type: "event",
        eventSeq: u64(m.eventSeq),
        kind: e.kind,
        ts: date(e.ts),
        body: fromRawOrValue(e.rawBody, e.body),
        progress: p ? { current: p.current, total: p.total, units: p.units, message: p.message } : undefined,
        resultChunk: c ? { resultId: c.resultId, chunkSeq: u64(c.chunkSeq), encoding: c.encoding, more: c.more } : undefined,
        extensions,
      };
    }
    case "result":
      return {
        type: "result",
        eventSeq: u64(m.eventSeq),
        result: fromRawOrValue(it.value.rawResult, it.value.result),
        summary: it.value.summary,
        resultId: it.value.resultId,
        resultSize: u64(it.value.resultSize),
        extensions,
      };
    case "error":
      return {
        extensions,
        type: "error",
        eventSeq: u64(m.eventSeq),
        finalStatus: it.value.finalStatus,
        code: it.value.code,
        message: it.value.message,
        retryable: it.value.retryable,
        details: fromRawOrValue(it.value.rawDetails, it.value.details),
      };
    default:
      throw new Error(`sessiongate: watch item with no content at event_seq ${m.eventSeq}`);
  }
}
