// The hand-written client over the generated code in ./gen (protoc-gen-es)
// and @grpc/grpc-js.
import { create, fromBinary, toBinary, } from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import * as grpc from "@grpc/grpc-js";
import { setTimeout as sleep } from "node:timers/promises";
import { ClientClosedError, DeadlineExceededError, fromServiceError, GatewayError } from "./errors.js";
import { checkedDepth } from "./depth.js";
import { OwnDeadline } from "./deadline.js";
import { callKey } from "./idempotency.js";
import { withReceiveLimit } from "./limits.js";
import { retryServiceConfig } from "./gen/retry_service_config.js";
import { JobState as PbJobState, SessionGateway, SessionPhase as PbPhase, SessionStatus as PbStatus, } from "./gen/sessiongate/v1/sessiongate_pb.js";
import { MAX_RESET_RESENDS, resendSafe, resetBackoffMs, Resumer, streamReset } from "./resume.js";
import { HEALTH_CHECK_PATH, replicaSilentError, silenceBound, StreamSilence } from "./silence.js";
import { fromRawOrValue, toValue } from "./values.js";
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
export function isTraceparent(tp) {
    const m = TRACEPARENT.exec(tp);
    return (m !== null &&
        m[1] !== "ff" &&
        !(m[1] === "00" && m[5] !== undefined) &&
        !/^0+$/.test(m[2]) &&
        !/^0+$/.test(m[3]));
}
/**
 * Keepalive while calls are in flight, unless channelOptions set their own: a
 * PING every second, and a connection whose PING is unanswered for two
 * seconds is closed, so that a call on a frozen replica (SIGSTOP, a VM pause:
 * its socket stays open, nothing comes back) fails UNAVAILABLE in about three
 * seconds and the retry policy sends it to another address of the target. The
 * gateway tolerates pings every 500 ms (--keepalive-min-time).
 */
const KEEPALIVE_OPTIONS = {
    "grpc.keepalive_time_ms": 1000,
    "grpc.keepalive_timeout_ms": 2000,
    "grpc.keepalive_permit_without_calls": 0,
};
const liveness = (s) => ({ [PbStatus.LIVE]: "live", [PbStatus.NOT_FOUND]: "not_found" })[s] ?? "unspecified";
const phase = (p) => ({ [PbPhase.READY]: "ready", [PbPhase.RECONNECTING]: "reconnecting", [PbPhase.CLOSING]: "closing" })[p] ?? "unspecified";
const date = (t) => (t ? timestampDate(t) : undefined);
/** A uint64 as a number: exact up to 2^53 (seqs, sizes and generations stay far below). */
const u64 = (v) => Number(v);
const jobStates = {
    [PbJobState.PENDING]: "pending",
    [PbJobState.RUNNING]: "running",
    [PbJobState.SUCCEEDED]: "succeeded",
    [PbJobState.FAILED]: "failed",
    [PbJobState.CANCELLED]: "cancelled",
    [PbJobState.TIMED_OUT]: "timed_out",
};
const leaseOut = (l) => l && Object.keys(l.capabilities).length > 0
    ? Object.fromEntries(Object.entries(l.capabilities).map(([ns, p]) => [ns, p.patterns]))
    : undefined;
const expiresOut = (c) => date(c?.expiresAt);
const extOut = (ext) => Object.fromEntries(Object.entries(ext).map(([k, v]) => [k, fromRawOrValue(new Uint8Array(), v)]));
const grant = (r) => ({
    agent: r.agent,
    traceId: r.traceId,
    lease: leaseOut(r.lease),
    leaseExpiresAt: expiresOut(r.leaseConstraints),
    budget: { ...r.budget },
});
const jobInfo = (j) => ({
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
function jobExtras(o) {
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
const path = (m) => `/${m.parent.typeName}/${m.name}`;
/** A slack for telling "the deadline had passed" on the client's clock. */
const DEADLINE_SLACK_MS = 10;
/** The error of a call ended by its own deadline (OwnDeadline) before any answer arrived. */
function ownDeadlineError(timeoutMs) {
    return new DeadlineExceededError(grpc.status.DEADLINE_EXCEEDED, `deadline exceeded: no answer within ${timeoutMs} ms`);
}
function abortError(signal) {
    return signal.reason instanceof Error ? signal.reason : new DOMException("The call was aborted", "AbortError");
}
function checkMs(name, v) {
    if (v !== undefined && !(Number.isFinite(v) && v > 0)) {
        throw new RangeError(`${name} must be a positive number of milliseconds`);
    }
}
/**
 * A connection to a sessiongate gateway. One Gateway may serve any number of
 * concurrent calls and sessions; close it (or `using gw = …`) when done.
 */
export class Gateway {
    #client;
    #auth;
    #silence;
    #closed = false;
    constructor(target, opts = {}) {
        const channelOptions = { ...KEEPALIVE_OPTIONS, ...withReceiveLimit({ ...opts.channelOptions }) };
        // Round robin over every address of the target (e.g.
        // "ipv4:10.0.0.1:50051,10.0.0.2:50051"), so that a call retried after a
        // frozen replica goes to another one.
        const roundRobin = { loadBalancingConfig: [{ [opts.loadBalancing ?? "round_robin"]: {} }] };
        if (opts.retry ?? true) {
            channelOptions["grpc.service_config"] = JSON.stringify({ ...retryServiceConfig, ...roundRobin });
            channelOptions["grpc.enable_retries"] = 1;
        }
        else {
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
    #healthCheck(sessionId, timeoutMs, done) {
        const call = this.#client.makeUnaryRequest(HEALTH_CHECK_PATH, (b) => b, (b) => b, Buffer.alloc(0), this.#metadata({}, sessionId), { deadline: Date.now() + timeoutMs }, (err) => done(err?.code === grpc.status.DEADLINE_EXCEEDED));
        return { cancel: () => call.cancel() };
    }
    #metadata(o, sessionId) {
        checkMs("timeoutMs", o.timeoutMs);
        checkMs("serverTimeoutMs", o.serverTimeoutMs);
        const md = new grpc.Metadata();
        if (this.#auth)
            md.set("authorization", this.#auth);
        const ms = o.serverTimeoutMs ?? o.timeoutMs;
        if (ms !== undefined)
            md.set(TIMEOUT_METADATA_KEY, String(Math.ceil(ms)));
        if (sessionId !== undefined)
            md.set(SESSION_METADATA_KEY, sessionId);
        if (o.traceparent !== undefined) {
            if (!isTraceparent(o.traceparent))
                throw new TypeError(`not a W3C traceparent: ${JSON.stringify(o.traceparent)}`);
            md.set(TRACEPARENT_METADATA_KEY, o.traceparent);
        }
        return md;
    }
    /** @internal */
    async unary(method, req, o, sessionId) {
        // A call whose stream a balancer reset (its replica died mid-response)
        // is sent again when that is safe (see resume.ts, resendSafe).
        const start = Date.now();
        for (let attempt = 0;; attempt++) {
            const left = o.timeoutMs === undefined ? undefined : Math.max(1, o.timeoutMs - (Date.now() - start));
            try {
                return await this.#unaryOnce(method, req, attempt === 0 ? o : { ...o, timeoutMs: left }, sessionId);
            }
            catch (err) {
                const pause = resetBackoffMs(attempt);
                if (attempt >= MAX_RESET_RESENDS ||
                    !streamReset(err) ||
                    !resendSafe(method.name, req) ||
                    (o.timeoutMs !== undefined && Date.now() + pause >= start + o.timeoutMs)) {
                    throw err;
                }
                try {
                    await sleep(pause, undefined, { signal: o.signal });
                }
                catch {
                    throw o.signal ? abortError(o.signal) : err;
                }
            }
        }
    }
    #unaryOnce(method, req, o, sessionId) {
        return new Promise((resolve, reject) => {
            const md = this.#metadata(o, sessionId);
            if (o.signal?.aborted)
                return reject(abortError(o.signal));
            if (this.#closed)
                return reject(new ClientClosedError());
            const deadline = o.timeoutMs !== undefined ? Date.now() + o.timeoutMs : undefined;
            const onAbort = () => call.cancel();
            // The deadline is kept by OwnDeadline, not grpc-js: see deadline.ts.
            const own = o.timeoutMs !== undefined ? new OwnDeadline(o.timeoutMs, () => call.cancel()) : undefined;
            const call = this.#client.makeUnaryRequest(path(method), (m) => Buffer.from(toBinary(method.input, m)), (b) => fromBinary(method.output, b), create(method.input, req), md, own ? { credentials: own.credentials } : {}, (err, res) => {
                own?.done();
                o.signal?.removeEventListener("abort", onAbort);
                if (err) {
                    if (o.signal?.aborted)
                        return reject(abortError(o.signal));
                    if (own?.expired && err.code === grpc.status.CANCELLED)
                        return reject(ownDeadlineError(o.timeoutMs));
                    const passed = deadline !== undefined && Date.now() >= deadline - DEADLINE_SLACK_MS;
                    return reject(fromServiceError(err, passed));
                }
                resolve(res);
            });
            o.signal?.addEventListener("abort", onAbort, { once: true });
        });
    }
    /** @internal */
    async *serverStream(method, req, o, sessionId, bounded = false) {
        const md = this.#metadata(o, sessionId);
        if (o.signal?.aborted)
            throw abortError(o.signal);
        if (this.#closed)
            throw new ClientClosedError();
        const deadline = o.timeoutMs !== undefined ? Date.now() + o.timeoutMs : undefined;
        // The deadline is kept by OwnDeadline, not grpc-js: see deadline.ts.
        const own = o.timeoutMs !== undefined ? new OwnDeadline(o.timeoutMs, () => call.cancel()) : undefined;
        const call = this.#client.makeServerStreamRequest(path(method), (m) => Buffer.from(toBinary(method.input, m)), (b) => fromBinary(method.output, b), create(method.input, req), md, own ? { credentials: own.credentials } : {});
        const onAbort = () => call.cancel();
        o.signal?.addEventListener("abort", onAbort, { once: true });
        const bound = bounded ? this.#silence : undefined;
        const silence = bound
            ? new StreamSilence(bound, (done) => this.#healthCheck(sessionId, bound.timeoutMs, done), () => call.cancel())
            : undefined;
        try {
            for await (const m of call) {
                silence?.received();
                yield m;
            }
        }
        catch (err) {
            if (o.signal?.aborted)
                throw abortError(o.signal);
            if (silence?.silent)
                throw replicaSilentError(bound);
            if (err instanceof Error && "code" in err && "metadata" in err) {
                if (own?.expired && err.code === grpc.status.CANCELLED)
                    throw ownDeadlineError(o.timeoutMs);
                const passed = deadline !== undefined && Date.now() >= deadline - DEADLINE_SLACK_MS;
                throw fromServiceError(err, passed);
            }
            throw err;
        }
        finally {
            silence?.stop();
            own?.done();
            o.signal?.removeEventListener("abort", onAbort);
            call.cancel(); // a no-op once the stream has ended; ends it on break
        }
    }
    /** Opens a session; close it with `await using` or session.close(). */
    async openSession(params = {}, o = {}) {
        const r = await this.unary(SessionGateway.method.openSession, params, o);
        return new Session(this, r.sessionId, r);
    }
    /** A handle on an existing session, e.g. one opened elsewhere. Nothing is sent until it is used. */
    session(sessionId) {
        return new Session(this, sessionId);
    }
    /** Probes a session's liveness (side-effect free). */
    async status(sessionId, o = {}) {
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
    async listSessions(o = {}) {
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
    close() {
        this.#closed = true;
        this.#client.close();
    }
    [Symbol.dispose]() {
        this.close();
    }
}
/**
 * A session on a runtime. Every call names it in the x-sessiongate-session
 * metadata. Close it with `await using s = await gw.openSession()` or
 * `await s.close()`.
 */
export class Session {
    #gw;
    #closed = false;
    /** The session id. */
    id;
    /** Features in effect (empty for a handle from gateway.session). */
    features;
    /** Agents the runtime offers: name → versions. */
    agents;
    /** The configured runtime name. */
    runtime;
    /** The id of the gateway instance that owns the session. */
    instanceId;
    /** @internal */
    constructor(gw, id, opened) {
        this.#gw = gw;
        this.id = id;
        this.features = opened?.features ?? [];
        this.agents = Object.fromEntries((opened?.agents ?? []).map((a) => [a.name, a.versions]));
        this.runtime = opened?.runtime?.name ?? "";
        this.instanceId = opened?.instanceId ?? "";
    }
    /** Runs a job and waits for its result; a failed job rejects with the GatewayError for its code. */
    async run(agent, input, o = {}) {
        const r = await this.#gw.unary(SessionGateway.method.runJob, {
            sessionId: this.id,
            agent,
            input: input === undefined ? undefined : toValue(checkedDepth(input)),
            idempotencyKey: callKey(o.idempotencyKey),
            maxRuntimeSec: o.maxRuntimeSec,
            ...jobExtras(o),
        }, o, this.id);
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
    async submit(agent, input, o = {}) {
        const r = await this.#gw.unary(SessionGateway.method.submitJob, {
            sessionId: this.id,
            agent,
            input: input === undefined ? undefined : toValue(checkedDepth(input)),
            idempotencyKey: callKey(o.idempotencyKey),
            maxRuntimeSec: o.maxRuntimeSec,
            ...jobExtras(o),
        }, o, this.id);
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
    async *listJobs(filter = "", o = {}) {
        let pageToken = "";
        do {
            const r = await this.#gw.unary(SessionGateway.method.listJobs, { sessionId: this.id, filter, pageSize: o.pageSize, pageToken }, o, this.id);
            for (const j of r.jobs)
                yield jobInfo(j);
            pageToken = r.nextPageToken;
        } while (pageToken !== "");
    }
    /**
     * Attaches this session to a job submitted through another of the caller's
     * sessions; watch then works for it here. A subscriber cannot cancel the
     * job (PermissionDeniedError).
     */
    async subscribe(job, o = {}) {
        const jobId = typeof job === "string" ? job : job.jobId;
        const r = await this.#gw.unary(SessionGateway.method.subscribeJob, { sessionId: this.id, jobId, history: o.history ?? false, fromEventSeq: BigInt(o.fromEventSeq ?? 0) }, o, this.id);
        return { job: jobInfo(r.job), subscribedFrom: u64(r.subscribedFrom), replayed: r.replayed };
    }
    /**
     * Streams a job's items, ending with its result or error. Leaving the
     * `for await` loop early ends the stream (the job goes on; see cancel).
     * A cut stream is re-opened from the last item delivered (see
     * WatchOptions.resume): every item arrives once, in order.
     */
    async *watch(job, o = {}) {
        const jobId = typeof job === "string" ? job : job.jobId;
        checkMs("timeoutMs", o.timeoutMs);
        const deadline = o.timeoutMs !== undefined ? Date.now() + o.timeoutMs : undefined;
        const policy = o.resume === false ? undefined : o.resume === true || o.resume === undefined ? {} : o.resume;
        const from = o.fromEventSeq ?? (typeof job === "string" ? 0 : job.afterEventSeq);
        const r = new Resumer(Number(from), policy, deadline);
        for (let first = true;; first = false) {
            const req = { sessionId: this.id, jobId, fromEventSeq: BigInt(r.cursor) };
            const co = first ? o : { ...o, timeoutMs: r.remaining(Date.now()) };
            try {
                for await (const m of this.#gw.serverStream(SessionGateway.method.watchJob, req, co, this.id, true)) {
                    if (r.deliver(u64(m.eventSeq), m.item.case !== "event"))
                        yield item(m);
                    if (r.done)
                        return;
                }
                return;
            }
            catch (err) {
                if (o.signal?.aborted)
                    throw err;
                const delay = r.cut(err, Date.now());
                if (delay === undefined)
                    throw err;
                try {
                    await sleep(delay, undefined, { signal: o.signal });
                }
                catch {
                    throw o.signal ? abortError(o.signal) : err;
                }
            }
        }
    }
    /** Asks the runtime to cancel a job; the job then ends with a CANCELLED error. */
    async cancel(job, reason = "", o = {}) {
        const jobId = typeof job === "string" ? job : job.jobId;
        await this.#gw.unary(SessionGateway.method.cancelJob, { sessionId: this.id, jobId, reason }, o, this.id);
    }
    /** Probes this session's liveness. */
    status(o = {}) {
        return this.#gw.status(this.id, o);
    }
    /** Closes the session upstream. Idempotent; a session the gateway no longer knows counts as closed. */
    async close(reason = "", o = {}) {
        if (this.#closed)
            return;
        try {
            await this.#gw.unary(SessionGateway.method.closeSession, { sessionId: this.id, reason }, o, this.id);
        }
        catch (err) {
            if (!(err instanceof GatewayError && err.reason === "SESSION_NOT_FOUND"))
                throw err;
        }
        this.#closed = true;
    }
    [Symbol.asyncDispose]() {
        return this.close();
    }
}
function item(m) {
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
//# sourceMappingURL=client.js.map