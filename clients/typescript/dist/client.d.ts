import { type DescMessage, type DescMethodServerStreaming, type DescMethodUnary, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { type OpenSessionResponse } from "./gen/sessiongate/v1/sessiongate_pb.js";
import { type ResumePolicy } from "./resume.js";
import { type SilenceBound } from "./silence.js";
import { type JsonValue } from "./values.js";
/** Request metadata asking the gateway for a timeout, in milliseconds. */
export declare const TIMEOUT_METADATA_KEY = "x-timeout-ms";
/**
 * Request metadata naming the session of a session-scoped call, for
 * session-affine routing; the gateway checks it against the request body.
 */
export declare const SESSION_METADATA_KEY = "x-sessiongate-session";
/**
 * Request metadata carrying the caller's W3C trace context; the gateway makes
 * its trace id the trace id of the jobs the call submits.
 */
export declare const TRACEPARENT_METADATA_KEY = "traceparent";
/** Whether tp is a W3C traceparent the gateway would take (not one it ignores). */
export declare function isTraceparent(tp: string): boolean;
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
export type WatchItem = ({
    type: "event";
    eventSeq: number;
    kind: string;
    ts?: Date;
    body: JsonValue;
    /** Set for kind "progress". */
    progress?: Progress;
    /** Set for kind "result_chunk". */
    resultChunk?: ResultChunk;
} | {
    type: "result";
    eventSeq: number;
    result: JsonValue;
    summary: string;
    resultId: string;
    resultSize: number;
} | {
    type: "error";
    eventSeq: number;
    /** "error", "cancelled" or "timed_out". */
    finalStatus: string;
    /** The ARCP error code, e.g. "CANCELLED". */
    code: string;
    message: string;
    retryable: boolean;
    details: JsonValue;
}) & {
    /** Vendor extensions of the item's envelope. */
    extensions: Record<string, JsonValue>;
};
/**
 * A connection to a sessiongate gateway. One Gateway may serve any number of
 * concurrent calls and sessions; close it (or `using gw = …`) when done.
 */
export declare class Gateway implements Disposable {
    #private;
    constructor(target: string, opts?: GatewayOptions);
    /** @internal */
    unary<I extends DescMessage, O extends DescMessage>(method: DescMethodUnary<I, O>, req: MessageInitShape<I>, o: CallOptions, sessionId?: string): Promise<MessageShape<O>>;
    /** @internal */
    serverStream<I extends DescMessage, O extends DescMessage>(method: DescMethodServerStreaming<I, O>, req: MessageInitShape<I>, o: CallOptions, sessionId?: string, bounded?: boolean): AsyncGenerator<MessageShape<O>, void, undefined>;
    /** Opens a session; close it with `await using` or session.close(). */
    openSession(params?: OpenSessionParams, o?: CallOptions): Promise<Session>;
    /** A handle on an existing session, e.g. one opened elsewhere. Nothing is sent until it is used. */
    session(sessionId: string): Session;
    /** Probes a session's liveness (side-effect free). */
    status(sessionId: string, o?: CallOptions): Promise<SessionStatus>;
    /** The caller's sessions, oldest first. */
    listSessions(o?: CallOptions): Promise<SessionInfo[]>;
    /**
     * Closes the channel. Idempotent. Calls made afterwards (a watch's
     * re-opening too) reject with ClientClosedError without sending anything;
     * calls already under way run to their end.
     */
    close(): void;
    [Symbol.dispose](): void;
}
/**
 * A session on a runtime. Every call names it in the x-sessiongate-session
 * metadata. Close it with `await using s = await gw.openSession()` or
 * `await s.close()`.
 */
export declare class Session implements AsyncDisposable {
    #private;
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
    constructor(gw: Gateway, id: string, opened?: OpenSessionResponse);
    /** Runs a job and waits for its result; a failed job rejects with the GatewayError for its code. */
    run(agent: string, input?: unknown, o?: JobOptions): Promise<RunResult>;
    /** Submits a job; resolves once the runtime accepted it. */
    submit(agent: string, input?: unknown, o?: JobOptions): Promise<Job>;
    /**
     * Lists the jobs the runtime reports for this session, in acceptance
     * order, a page (one call) at a time as the loop goes on. filter is an
     * AIP-160 filter, e.g. `(state = PENDING OR state = RUNNING) AND agent = "echo"`;
     * a bad one rejects with InvalidArgumentError.
     */
    listJobs(filter?: string, o?: ListJobsOptions): AsyncGenerator<JobInfo, void, undefined>;
    /**
     * Attaches this session to a job submitted through another of the caller's
     * sessions; watch then works for it here. A subscriber cannot cancel the
     * job (PermissionDeniedError).
     */
    subscribe(job: string | Job, o?: SubscribeOptions): Promise<Subscription>;
    /**
     * Streams a job's items, ending with its result or error. Leaving the
     * `for await` loop early ends the stream (the job goes on; see cancel).
     * A cut stream is re-opened from the last item delivered (see
     * WatchOptions.resume): every item arrives once, in order.
     */
    watch(job: string | Job, o?: WatchOptions): AsyncGenerator<WatchItem, void, undefined>;
    /** Asks the runtime to cancel a job; the job then ends with a CANCELLED error. */
    cancel(job: string | Job, reason?: string, o?: CallOptions): Promise<void>;
    /** Probes this session's liveness. */
    status(o?: CallOptions): Promise<SessionStatus>;
    /** Closes the session upstream. Idempotent; a session the gateway no longer knows counts as closed. */
    close(reason?: string, o?: CallOptions): Promise<void>;
    [Symbol.asyncDispose](): Promise<void>;
}
