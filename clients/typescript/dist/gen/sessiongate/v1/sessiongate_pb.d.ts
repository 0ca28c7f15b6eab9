import type { GenEnum, GenFile, GenMessage, GenService } from "@bufbuild/protobuf/codegenv2";
import type { Timestamp, Value } from "@bufbuild/protobuf/wkt";
import type { Message } from "@bufbuild/protobuf";
/**
 * Describes the file sessiongate/v1/sessiongate.proto.
 */
export declare const file_sessiongate_v1_sessiongate: GenFile;
/**
 * Agent is an agent a runtime offers.
 *
 * @generated from message sessiongate.v1.Agent
 */
export type Agent = Message<"sessiongate.v1.Agent"> & {
    /**
     * Agent name, used in SubmitJobRequest.agent.
     *
     * @generated from field: string name = 1;
     */
    name: string;
    /**
     * Versions offered, when the runtime lists them.
     *
     * @generated from field: repeated string versions = 2;
     */
    versions: string[];
    /**
     * The version used when none is named.
     *
     * @generated from field: string default_version = 3;
     */
    defaultVersion: string;
};
/**
 * Describes the message sessiongate.v1.Agent.
 * Use `create(AgentSchema)` to create a new message.
 */
export declare const AgentSchema: GenMessage<Agent>;
/**
 * RuntimeInfo describes the runtime a session lives on.
 *
 * @generated from message sessiongate.v1.RuntimeInfo
 */
export type RuntimeInfo = Message<"sessiongate.v1.RuntimeInfo"> & {
    /**
     * The gateway's configured name for the runtime (e.g. "default").
     *
     * @generated from field: string name = 1;
     */
    name: string;
    /**
     * The runtime's own implementation name, from its welcome.
     *
     * @generated from field: string implementation = 2;
     */
    implementation: string;
    /**
     * The runtime's version, from its welcome.
     *
     * @generated from field: string version = 3;
     */
    version: string;
};
/**
 * Describes the message sessiongate.v1.RuntimeInfo.
 * Use `create(RuntimeInfoSchema)` to create a new message.
 */
export declare const RuntimeInfoSchema: GenMessage<RuntimeInfo>;
/**
 * Lease is a set of capability grants (ARCP §9.1-9.2): namespace to
 * patterns, e.g. "fs.read" to ["/workspace/**"], "cost.budget" to
 * ["USD:5.00"], "model.use" to ["tier-fast/*"]. The gateway passes it
 * through unchanged; the runtime enforces it.
 *
 * @generated from message sessiongate.v1.Lease
 */
export type Lease = Message<"sessiongate.v1.Lease"> & {
    /**
     * Capability namespace (fs.read, fs.write, net.fetch, tool.call,
     * agent.delegate, cost.budget, model.use, or a runtime's own) to patterns.
     *
     * @generated from field: map<string, sessiongate.v1.LeasePatterns> capabilities = 1;
     */
    capabilities: {
        [key: string]: LeasePatterns;
    };
};
/**
 * Describes the message sessiongate.v1.Lease.
 * Use `create(LeaseSchema)` to create a new message.
 */
export declare const LeaseSchema: GenMessage<Lease>;
/**
 * LeasePatterns are the patterns granted in one capability namespace.
 *
 * @generated from message sessiongate.v1.LeasePatterns
 */
export type LeasePatterns = Message<"sessiongate.v1.LeasePatterns"> & {
    /**
     * Glob or amount patterns; their grammar is the namespace's.
     *
     * @generated from field: repeated string patterns = 1;
     */
    patterns: string[];
};
/**
 * Describes the message sessiongate.v1.LeasePatterns.
 * Use `create(LeasePatternsSchema)` to create a new message.
 */
export declare const LeasePatternsSchema: GenMessage<LeasePatterns>;
/**
 * LeaseConstraints bound a lease (ARCP §9.5).
 *
 * @generated from message sessiongate.v1.LeaseConstraints
 */
export type LeaseConstraints = Message<"sessiongate.v1.LeaseConstraints"> & {
    /**
     * Optional on input. When the lease ends: it must be in the future, and
     * no later than the runtime allows. Needs the lease_expires_at feature.
     * The job then fails with LEASE_EXPIRED if it is still running.
     *
     * @generated from field: google.protobuf.Timestamp expires_at = 1;
     */
    expiresAt?: Timestamp | undefined;
};
/**
 * Describes the message sessiongate.v1.LeaseConstraints.
 * Use `create(LeaseConstraintsSchema)` to create a new message.
 */
export declare const LeaseConstraintsSchema: GenMessage<LeaseConstraints>;
/**
 * Progress is a typed progress report (ARCP §8.2.1).
 *
 * @generated from message sessiongate.v1.Progress
 */
export type Progress = Message<"sessiongate.v1.Progress"> & {
    /**
     * Work done so far; never negative.
     *
     * @generated from field: double current = 1;
     */
    current: number;
    /**
     * Total work, when known; absent means indeterminate.
     *
     * @generated from field: optional double total = 2;
     */
    total?: number | undefined;
    /**
     * Unit of current and total, e.g. "files".
     *
     * @generated from field: string units = 3;
     */
    units: string;
    /**
     * Human-readable status line.
     *
     * @generated from field: string message = 4;
     */
    message: string;
};
/**
 * Describes the message sessiongate.v1.Progress.
 * Use `create(ProgressSchema)` to create a new message.
 */
export declare const ProgressSchema: GenMessage<Progress>;
/**
 * ResultChunk describes one chunk of a streamed result (ARCP §8.4). The
 * chunk's data stays in JobEvent.body.data.
 *
 * @generated from message sessiongate.v1.ResultChunk
 */
export type ResultChunk = Message<"sessiongate.v1.ResultChunk"> & {
    /**
     * Identifies the assembled result; JobResult.result_id names it.
     *
     * @generated from field: string result_id = 1;
     */
    resultId: string;
    /**
     * 0-based index of the chunk within the result.
     *
     * @generated from field: uint64 chunk_seq = 2;
     */
    chunkSeq: bigint;
    /**
     * "utf8" or "base64": how body.data is encoded.
     *
     * @generated from field: string encoding = 3;
     */
    encoding: string;
    /**
     * Whether more chunks follow.
     *
     * @generated from field: bool more = 4;
     */
    more: boolean;
};
/**
 * Describes the message sessiongate.v1.ResultChunk.
 * Use `create(ResultChunkSchema)` to create a new message.
 */
export declare const ResultChunkSchema: GenMessage<ResultChunk>;
/**
 * Job is a job as the runtime describes it in session.list_jobs (§6.6) and
 * job.subscribed (§7.6). Every field is output only.
 *
 * @generated from message sessiongate.v1.Job
 */
export type Job = Message<"sessiongate.v1.Job"> & {
    /**
     * The runtime's job id.
     *
     * @generated from field: string job_id = 1;
     */
    jobId: string;
    /**
     * The resolved agent, "name@version".
     *
     * @generated from field: string agent = 2;
     */
    agent: string;
    /**
     * Where the job stands.
     *
     * @generated from field: sessiongate.v1.JobState state = 3;
     */
    state: JobState;
    /**
     * The runtime's status string as sent (for states this API does not
     * know yet).
     *
     * @generated from field: string raw_status = 4;
     */
    rawStatus: string;
    /**
     * The effective lease.
     *
     * @generated from field: sessiongate.v1.Lease lease = 5;
     */
    lease?: Lease | undefined;
    /**
     * The lease's constraints, when it has any.
     *
     * @generated from field: sessiongate.v1.LeaseConstraints lease_constraints = 6;
     */
    leaseConstraints?: LeaseConstraints | undefined;
    /**
     * Budget counters per currency, when the lease has cost.budget (current
     * values in SubscribeJob; as listed in ListJobs).
     *
     * @generated from field: map<string, double> budget = 7;
     */
    budget: {
        [key: string]: number;
    };
    /**
     * The job that delegated this one, if any.
     *
     * @generated from field: string parent_job_id = 8;
     */
    parentJobId: string;
    /**
     * When the job was created.
     *
     * @generated from field: google.protobuf.Timestamp create_time = 9;
     */
    createTime?: Timestamp | undefined;
    /**
     * The job's W3C trace id (32 lowercase hex characters).
     *
     * @generated from field: string trace_id = 10;
     */
    traceId: string;
    /**
     * The highest event_seq of the job (in the numbering of the session that
     * lists it), when the runtime says.
     *
     * @generated from field: uint64 last_event_seq = 11;
     */
    lastEventSeq: bigint;
};
/**
 * Describes the message sessiongate.v1.Job.
 * Use `create(JobSchema)` to create a new message.
 */
export declare const JobSchema: GenMessage<Job>;
/**
 * OpenSessionRequest opens a session.
 *
 * @generated from message sessiongate.v1.OpenSessionRequest
 */
export type OpenSessionRequest = Message<"sessiongate.v1.OpenSessionRequest"> & {
    /**
     * Configured runtime name; empty selects the default runtime.
     *
     * @generated from field: string runtime = 1;
     */
    runtime: string;
    /**
     * Name of the calling application, forwarded upstream as client info.
     *
     * @generated from field: string client_name = 2;
     */
    clientName: string;
    /**
     * ARCP 1.1 features requested, e.g. "heartbeat", "ack", "subscribe".
     * Empty requests the gateway's default set (every feature the gateway
     * implements). A known ARCP feature the gateway does not implement
     * ("provisioned_credentials") is never requested upstream and never in
     * effect; an unknown name is INVALID_ARGUMENT.
     *
     * @generated from field: repeated string features = 3;
     */
    features: string[];
    /**
     * Bearer token presented to the runtime; empty uses the configured one.
     *
     * @generated from field: string upstream_token = 4;
     */
    upstreamToken: string;
};
/**
 * Describes the message sessiongate.v1.OpenSessionRequest.
 * Use `create(OpenSessionRequestSchema)` to create a new message.
 */
export declare const OpenSessionRequestSchema: GenMessage<OpenSessionRequest>;
/**
 * OpenSessionResponse describes the new session.
 *
 * @generated from message sessiongate.v1.OpenSessionResponse
 */
export type OpenSessionResponse = Message<"sessiongate.v1.OpenSessionResponse"> & {
    /**
     * Opaque session id: the owning instance's id, then 128 random bits.
     *
     * @generated from field: string session_id = 1;
     */
    sessionId: string;
    /**
     * Features in effect: requested, implemented by the gateway and offered
     * by the runtime. Exactly these are used on the session.
     *
     * @generated from field: repeated string features = 2;
     */
    features: string[];
    /**
     * Agents the runtime offers.
     *
     * @generated from field: repeated sessiongate.v1.Agent agents = 3;
     */
    agents: Agent[];
    /**
     * The runtime the session lives on.
     *
     * @generated from field: sessiongate.v1.RuntimeInfo runtime = 4;
     */
    runtime?: RuntimeInfo | undefined;
    /**
     * The id of the gateway instance that owns the session.
     *
     * @generated from field: string instance_id = 5;
     */
    instanceId: string;
};
/**
 * Describes the message sessiongate.v1.OpenSessionResponse.
 * Use `create(OpenSessionResponseSchema)` to create a new message.
 */
export declare const OpenSessionResponseSchema: GenMessage<OpenSessionResponse>;
/**
 * GetSessionStatusRequest names a session.
 *
 * @generated from message sessiongate.v1.GetSessionStatusRequest
 */
export type GetSessionStatusRequest = Message<"sessiongate.v1.GetSessionStatusRequest"> & {
    /**
     * The session id returned by OpenSession.
     *
     * @generated from field: string session_id = 1;
     */
    sessionId: string;
    /**
     * How much to return. Unspecified is FULL; balancers and health checks
     * that route on liveness should ask for BASIC.
     *
     * @generated from field: sessiongate.v1.SessionStatusView view = 2;
     */
    view: SessionStatusView;
};
/**
 * Describes the message sessiongate.v1.GetSessionStatusRequest.
 * Use `create(GetSessionStatusRequestSchema)` to create a new message.
 */
export declare const GetSessionStatusRequestSchema: GenMessage<GetSessionStatusRequest>;
/**
 * GetSessionStatusResponse reports liveness. Fields other than status and
 * instance_id are set only when the status is LIVE; runtime and features
 * only in the FULL view.
 *
 * @generated from message sessiongate.v1.GetSessionStatusResponse
 */
export type GetSessionStatusResponse = Message<"sessiongate.v1.GetSessionStatusResponse"> & {
    /**
     * LIVE or NOT_FOUND.
     *
     * @generated from field: sessiongate.v1.SessionStatus status = 1;
     */
    status: SessionStatus;
    /**
     * Phase of the upstream connection.
     *
     * @generated from field: sessiongate.v1.SessionPhase phase = 2;
     */
    phase: SessionPhase;
    /**
     * Configured runtime name.
     *
     * @generated from field: string runtime = 3;
     */
    runtime: string;
    /**
     * Features in effect (as in OpenSessionResponse.features).
     *
     * @generated from field: repeated string features = 4;
     */
    features: string[];
    /**
     * Highest upstream event_seq received on the session.
     *
     * @generated from field: uint64 last_event_seq = 5;
     */
    lastEventSeq: bigint;
    /**
     * Upstream generation: bumped on every (re)initialisation.
     *
     * @generated from field: uint64 generation = 6;
     */
    generation: bigint;
    /**
     * The id of the gateway instance answering.
     *
     * @generated from field: string instance_id = 7;
     */
    instanceId: string;
};
/**
 * Describes the message sessiongate.v1.GetSessionStatusResponse.
 * Use `create(GetSessionStatusResponseSchema)` to create a new message.
 */
export declare const GetSessionStatusResponseSchema: GenMessage<GetSessionStatusResponse>;
/**
 * CloseSessionRequest names the session to close.
 *
 * @generated from message sessiongate.v1.CloseSessionRequest
 */
export type CloseSessionRequest = Message<"sessiongate.v1.CloseSessionRequest"> & {
    /**
     * The session id returned by OpenSession.
     *
     * @generated from field: string session_id = 1;
     */
    sessionId: string;
    /**
     * Optional reason forwarded upstream.
     *
     * @generated from field: string reason = 2;
     */
    reason: string;
};
/**
 * Describes the message sessiongate.v1.CloseSessionRequest.
 * Use `create(CloseSessionRequestSchema)` to create a new message.
 */
export declare const CloseSessionRequestSchema: GenMessage<CloseSessionRequest>;
/**
 * CloseSessionResponse is empty.
 *
 * @generated from message sessiongate.v1.CloseSessionResponse
 */
export type CloseSessionResponse = Message<"sessiongate.v1.CloseSessionResponse"> & {};
/**
 * Describes the message sessiongate.v1.CloseSessionResponse.
 * Use `create(CloseSessionResponseSchema)` to create a new message.
 */
export declare const CloseSessionResponseSchema: GenMessage<CloseSessionResponse>;
/**
 * ListSessionsRequest has no fields: it lists the caller's own sessions.
 *
 * @generated from message sessiongate.v1.ListSessionsRequest
 */
export type ListSessionsRequest = Message<"sessiongate.v1.ListSessionsRequest"> & {};
/**
 * Describes the message sessiongate.v1.ListSessionsRequest.
 * Use `create(ListSessionsRequestSchema)` to create a new message.
 */
export declare const ListSessionsRequestSchema: GenMessage<ListSessionsRequest>;
/**
 * SessionInfo summarises one session.
 *
 * @generated from message sessiongate.v1.SessionInfo
 */
export type SessionInfo = Message<"sessiongate.v1.SessionInfo"> & {
    /**
     * Session id.
     *
     * @generated from field: string session_id = 1;
     */
    sessionId: string;
    /**
     * Phase of the upstream connection.
     *
     * @generated from field: sessiongate.v1.SessionPhase phase = 2;
     */
    phase: SessionPhase;
    /**
     * Configured runtime name.
     *
     * @generated from field: string runtime = 3;
     */
    runtime: string;
    /**
     * When the session was opened.
     *
     * @generated from field: google.protobuf.Timestamp opened_at = 4;
     */
    openedAt?: Timestamp | undefined;
    /**
     * Jobs submitted through the session that have not ended.
     *
     * @generated from field: uint32 active_jobs = 5;
     */
    activeJobs: number;
};
/**
 * Describes the message sessiongate.v1.SessionInfo.
 * Use `create(SessionInfoSchema)` to create a new message.
 */
export declare const SessionInfoSchema: GenMessage<SessionInfo>;
/**
 * ListSessionsResponse lists the caller's sessions.
 *
 * @generated from message sessiongate.v1.ListSessionsResponse
 */
export type ListSessionsResponse = Message<"sessiongate.v1.ListSessionsResponse"> & {
    /**
     * Sessions, oldest first.
     *
     * @generated from field: repeated sessiongate.v1.SessionInfo sessions = 1;
     */
    sessions: SessionInfo[];
};
/**
 * Describes the message sessiongate.v1.ListSessionsResponse.
 * Use `create(ListSessionsResponseSchema)` to create a new message.
 */
export declare const ListSessionsResponseSchema: GenMessage<ListSessionsResponse>;
/**
 * SubmitJobRequest submits a job to a session's runtime.
 *
 * @generated from message sessiongate.v1.SubmitJobRequest
 */
export type SubmitJobRequest = Message<"sessiongate.v1.SubmitJobRequest"> & {
    /**
     * The session id returned by OpenSession.
     *
     * @generated from field: string session_id = 1;
     */
    sessionId: string;
    /**
     * Agent name, "name" or "name@version".
     *
     * @generated from field: string agent = 2;
     */
    agent: string;
    /**
     * Agent input: any JSON value.
     *
     * @generated from field: google.protobuf.Value input = 3;
     */
    input?: Value | undefined;
    /**
     * Optional idempotency key: a repeated submit with the same key and
     * input returns the same job.
     *
     * @generated from field: string idempotency_key = 4;
     */
    idempotencyKey: string;
    /**
     * Optional runtime-side limit on the job's duration, in seconds.
     *
     * @generated from field: uint32 max_runtime_sec = 5;
     */
    maxRuntimeSec: number;
    /**
     * Optional. The agent version, when agent names none: the job runs
     * "agent@agent_version" (needs agent_versions). Empty: the runtime's
     * default version.
     *
     * @generated from field: string agent_version = 6;
     */
    agentVersion: string;
    /**
     * Optional. Capabilities requested for the job (ARCP lease_request,
     * §7.1); the runtime grants them or rejects the submit
     * (PERMISSION_DENIED beyond its limits). cost.budget needs the
     * cost.budget feature, model.use the model.use feature.
     *
     * @generated from field: sessiongate.v1.Lease lease_request = 7;
     */
    leaseRequest?: Lease | undefined;
    /**
     * Optional. Constraints on the lease (needs lease_expires_at). A past or
     * malformed expires_at is INVALID_ARGUMENT.
     *
     * @generated from field: sessiongate.v1.LeaseConstraints lease_constraints = 8;
     */
    leaseConstraints?: LeaseConstraints | undefined;
    /**
     * Optional. Vendor extensions put on the job.submit envelope. Every key
     * must start with "x-vendor."; values are JSON.
     *
     * @generated from field: map<string, google.protobuf.Value> extensions = 9;
     */
    extensions: {
        [key: string]: Value;
    };
};
/**
 * Describes the message sessiongate.v1.SubmitJobRequest.
 * Use `create(SubmitJobRequestSchema)` to create a new message.
 */
export declare const SubmitJobRequestSchema: GenMessage<SubmitJobRequest>;
/**
 * SubmitJobResponse identifies the accepted job. Every field is output only.
 *
 * @generated from message sessiongate.v1.SubmitJobResponse
 */
export type SubmitJobResponse = Message<"sessiongate.v1.SubmitJobResponse"> & {
    /**
     * The runtime's job id.
     *
     * @generated from field: string job_id = 1;
     */
    jobId: string;
    /**
     * When the runtime accepted the job.
     *
     * @generated from field: google.protobuf.Timestamp accepted_at = 2;
     */
    acceptedAt?: Timestamp | undefined;
    /**
     * The resolved agent, "name@version", when the runtime says.
     *
     * @generated from field: string agent = 3;
     */
    agent: string;
    /**
     * The job's W3C trace id: the trace id of the caller's traceparent
     * metadata, else a fresh one (see README, "Trace context").
     *
     * @generated from field: string trace_id = 4;
     */
    traceId: string;
    /**
     * The effective lease granted by the runtime.
     *
     * @generated from field: sessiongate.v1.Lease lease = 5;
     */
    lease?: Lease | undefined;
    /**
     * The lease's constraints as the runtime echoed them.
     *
     * @generated from field: sessiongate.v1.LeaseConstraints lease_constraints = 6;
     */
    leaseConstraints?: LeaseConstraints | undefined;
    /**
     * Initial budget counters per currency, when the lease has cost.budget.
     *
     * @generated from field: map<string, double> budget = 7;
     */
    budget: {
        [key: string]: number;
    };
    /**
     * Vendor extensions of the job.accepted envelope ("x-vendor.*").
     *
     * @generated from field: map<string, google.protobuf.Value> extensions = 8;
     */
    extensions: {
        [key: string]: Value;
    };
    /**
     * Every event of the job has an event_seq above this one (the session's
     * latest event when the runtime accepted the job). Watch the job from it
     * instead of from 0: the same events, and a watch cut before its first
     * event (a rolling restart) continues on the replica that took the
     * session over, which holds the session's events only from its resume
     * point on. 0 when the gateway cannot vouch for it.
     *
     * @generated from field: uint64 after_event_seq = 9;
     */
    afterEventSeq: bigint;
};
/**
 * Describes the message sessiongate.v1.SubmitJobResponse.
 * Use `create(SubmitJobResponseSchema)` to create a new message.
 */
export declare const SubmitJobResponseSchema: GenMessage<SubmitJobResponse>;
/**
 * RunJobRequest submits a job and waits for its result.
 *
 * @generated from message sessiongate.v1.RunJobRequest
 */
export type RunJobRequest = Message<"sessiongate.v1.RunJobRequest"> & {
    /**
     * The session id returned by OpenSession.
     *
     * @generated from field: string session_id = 1;
     */
    sessionId: string;
    /**
     * Agent name, "name" or "name@version".
     *
     * @generated from field: string agent = 2;
     */
    agent: string;
    /**
     * Agent input: any JSON value.
     *
     * @generated from field: google.protobuf.Value input = 3;
     */
    input?: Value | undefined;
    /**
     * Optional idempotency key.
     *
     * @generated from field: string idempotency_key = 4;
     */
    idempotencyKey: string;
    /**
     * Optional runtime-side limit on the job's duration, in seconds.
     *
     * @generated from field: uint32 max_runtime_sec = 5;
     */
    maxRuntimeSec: number;
    /**
     * Optional. The agent version, when agent names none: the job runs
     * "agent@agent_version" (needs agent_versions). Empty: the runtime's
     * default version.
     *
     * @generated from field: string agent_version = 6;
     */
    agentVersion: string;
    /**
     * Optional. Capabilities requested for the job (ARCP lease_request,
     * §7.1); the runtime grants them or rejects the submit
     * (PERMISSION_DENIED beyond its limits). cost.budget needs the
     * cost.budget feature, model.use the model.use feature.
     *
     * @generated from field: sessiongate.v1.Lease lease_request = 7;
     */
    leaseRequest?: Lease | undefined;
    /**
     * Optional. Constraints on the lease (needs lease_expires_at). A past or
     * malformed expires_at is INVALID_ARGUMENT.
     *
     * @generated from field: sessiongate.v1.LeaseConstraints lease_constraints = 8;
     */
    leaseConstraints?: LeaseConstraints | undefined;
    /**
     * Optional. Vendor extensions put on the job.submit envelope. Every key
     * must start with "x-vendor."; values are JSON.
     *
     * @generated from field: map<string, google.protobuf.Value> extensions = 9;
     */
    extensions: {
        [key: string]: Value;
    };
};
/**
 * Describes the message sessiongate.v1.RunJobRequest.
 * Use `create(RunJobRequestSchema)` to create a new message.
 */
export declare const RunJobRequestSchema: GenMessage<RunJobRequest>;
/**
 * RunJobResponse carries a successful job's result. A failed job ends the
 * call with a status instead (see README, "Status mapping").
 *
 * @generated from message sessiongate.v1.RunJobResponse
 */
export type RunJobResponse = Message<"sessiongate.v1.RunJobResponse"> & {
    /**
     * The runtime's job id.
     *
     * @generated from field: string job_id = 1;
     */
    jobId: string;
    /**
     * The job's result: any JSON value.
     *
     * @generated from field: google.protobuf.Value result = 2;
     */
    result?: Value | undefined;
    /**
     * Optional summary from the runtime.
     *
     * @generated from field: string summary = 3;
     */
    summary: string;
    /**
     * Set instead of result when the runtime's result is JSON that has no
     * google.protobuf.Value form (invalid UTF-8, a number beyond float64):
     * the JSON text exactly as the runtime sent it. Parse it with a JSON
     * parser of your own.
     *
     * @generated from field: bytes raw_result = 4;
     */
    rawResult: Uint8Array;
    /**
     * The resolved agent, "name@version", when the runtime says.
     *
     * @generated from field: string agent = 5;
     */
    agent: string;
    /**
     * The job's W3C trace id (see SubmitJobResponse.trace_id).
     *
     * @generated from field: string trace_id = 6;
     */
    traceId: string;
    /**
     * The effective lease granted by the runtime.
     *
     * @generated from field: sessiongate.v1.Lease lease = 7;
     */
    lease?: Lease | undefined;
    /**
     * The lease's constraints as the runtime echoed them.
     *
     * @generated from field: sessiongate.v1.LeaseConstraints lease_constraints = 8;
     */
    leaseConstraints?: LeaseConstraints | undefined;
    /**
     * Initial budget counters, when the lease has cost.budget.
     *
     * @generated from field: map<string, double> budget = 9;
     */
    budget: {
        [key: string]: number;
    };
    /**
     * Set when the result was streamed (result_chunk, §8.4): its id. result
     * (utf8) or raw_result (bytes) then holds the assembled result.
     *
     * @generated from field: string result_id = 10;
     */
    resultId: string;
    /**
     * Size in bytes of a streamed result, as the runtime announced it.
     *
     * @generated from field: int64 result_size = 11;
     */
    resultSize: bigint;
    /**
     * Vendor extensions of the job.result envelope ("x-vendor.*").
     *
     * @generated from field: map<string, google.protobuf.Value> extensions = 12;
     */
    extensions: {
        [key: string]: Value;
    };
};
/**
 * Describes the message sessiongate.v1.RunJobResponse.
 * Use `create(RunJobResponseSchema)` to create a new message.
 */
export declare const RunJobResponseSchema: GenMessage<RunJobResponse>;
/**
 * CancelJobRequest names a job to cancel.
 *
 * @generated from message sessiongate.v1.CancelJobRequest
 */
export type CancelJobRequest = Message<"sessiongate.v1.CancelJobRequest"> & {
    /**
     * The session id returned by OpenSession.
     *
     * @generated from field: string session_id = 1;
     */
    sessionId: string;
    /**
     * The job id returned by SubmitJob.
     *
     * @generated from field: string job_id = 2;
     */
    jobId: string;
    /**
     * Optional reason forwarded upstream.
     *
     * @generated from field: string reason = 3;
     */
    reason: string;
};
/**
 * Describes the message sessiongate.v1.CancelJobRequest.
 * Use `create(CancelJobRequestSchema)` to create a new message.
 */
export declare const CancelJobRequestSchema: GenMessage<CancelJobRequest>;
/**
 * CancelJobResponse is empty: the job ends with a CANCELLED error, visible
 * to WatchJob.
 *
 * @generated from message sessiongate.v1.CancelJobResponse
 */
export type CancelJobResponse = Message<"sessiongate.v1.CancelJobResponse"> & {};
/**
 * Describes the message sessiongate.v1.CancelJobResponse.
 * Use `create(CancelJobResponseSchema)` to create a new message.
 */
export declare const CancelJobResponseSchema: GenMessage<CancelJobResponse>;
/**
 * WatchJobRequest names a job to watch.
 *
 * @generated from message sessiongate.v1.WatchJobRequest
 */
export type WatchJobRequest = Message<"sessiongate.v1.WatchJobRequest"> & {
    /**
     * The session id returned by OpenSession.
     *
     * @generated from field: string session_id = 1;
     */
    sessionId: string;
    /**
     * The job id returned by SubmitJob.
     *
     * @generated from field: string job_id = 2;
     */
    jobId: string;
    /**
     * Deliver only items with event_seq greater than this (0 = from the start).
     *
     * @generated from field: uint64 from_event_seq = 3;
     */
    fromEventSeq: bigint;
};
/**
 * Describes the message sessiongate.v1.WatchJobRequest.
 * Use `create(WatchJobRequestSchema)` to create a new message.
 */
export declare const WatchJobRequestSchema: GenMessage<WatchJobRequest>;
/**
 * JobEvent is one job.event from the runtime.
 *
 * @generated from message sessiongate.v1.JobEvent
 */
export type JobEvent = Message<"sessiongate.v1.JobEvent"> & {
    /**
     * Event kind: log, progress, status, … or a vendor kind "x-vendor.…".
     *
     * @generated from field: string kind = 1;
     */
    kind: string;
    /**
     * When the runtime emitted it.
     *
     * @generated from field: google.protobuf.Timestamp ts = 2;
     */
    ts?: Timestamp | undefined;
    /**
     * Kind-specific body: any JSON value.
     *
     * @generated from field: google.protobuf.Value body = 3;
     */
    body?: Value | undefined;
    /**
     * Set instead of body when the runtime's body is JSON that has no
     * google.protobuf.Value form (invalid UTF-8, a number beyond float64):
     * the JSON text exactly as the runtime sent it. The event is still
     * delivered in order with its event_seq; the stream goes on.
     *
     * @generated from field: bytes raw_body = 4;
     */
    rawBody: Uint8Array;
    /**
     * Set for kind "progress" when the body is a valid progress body
     * (§8.2.1); body is still set.
     *
     * @generated from field: sessiongate.v1.Progress progress = 5;
     */
    progress?: Progress | undefined;
    /**
     * Set for kind "result_chunk": the chunk's metadata (§8.4); body is
     * still set and holds the data.
     *
     * @generated from field: sessiongate.v1.ResultChunk result_chunk = 6;
     */
    resultChunk?: ResultChunk | undefined;
};
/**
 * Describes the message sessiongate.v1.JobEvent.
 * Use `create(JobEventSchema)` to create a new message.
 */
export declare const JobEventSchema: GenMessage<JobEvent>;
/**
 * JobResult is a job's successful end.
 *
 * @generated from message sessiongate.v1.JobResult
 */
export type JobResult = Message<"sessiongate.v1.JobResult"> & {
    /**
     * The result: any JSON value.
     *
     * @generated from field: google.protobuf.Value result = 1;
     */
    result?: Value | undefined;
    /**
     * Optional summary.
     *
     * @generated from field: string summary = 2;
     */
    summary: string;
    /**
     * Set instead of result when the result has no google.protobuf.Value
     * form: the JSON text exactly as the runtime sent it (see JobEvent.raw_body).
     *
     * @generated from field: bytes raw_result = 3;
     */
    rawResult: Uint8Array;
    /**
     * Set when the result was streamed in result_chunk events (§8.4): the
     * result is the concatenation of those chunks' decoded data, in
     * chunk_seq order; result is then unset.
     *
     * @generated from field: string result_id = 4;
     */
    resultId: string;
    /**
     * Size in bytes of the streamed result, as the runtime announced it.
     *
     * @generated from field: int64 result_size = 5;
     */
    resultSize: bigint;
};
/**
 * Describes the message sessiongate.v1.JobResult.
 * Use `create(JobResultSchema)` to create a new message.
 */
export declare const JobResultSchema: GenMessage<JobResult>;
/**
 * JobError is a job's unsuccessful end.
 *
 * @generated from message sessiongate.v1.JobError
 */
export type JobError = Message<"sessiongate.v1.JobError"> & {
    /**
     * "error", "cancelled" or "timed_out".
     *
     * @generated from field: string final_status = 1;
     */
    finalStatus: string;
    /**
     * ARCP error code, e.g. "CANCELLED", "INVALID_REQUEST".
     *
     * @generated from field: string code = 2;
     */
    code: string;
    /**
     * Runtime's message.
     *
     * @generated from field: string message = 3;
     */
    message: string;
    /**
     * Whether the runtime says a retry may succeed.
     *
     * @generated from field: bool retryable = 4;
     */
    retryable: boolean;
    /**
     * Optional details: any JSON value.
     *
     * @generated from field: google.protobuf.Value details = 5;
     */
    details?: Value | undefined;
    /**
     * Set instead of details when they have no google.protobuf.Value form:
     * the JSON text exactly as the runtime sent it (see JobEvent.raw_body).
     *
     * @generated from field: bytes raw_details = 6;
     */
    rawDetails: Uint8Array;
};
/**
 * Describes the message sessiongate.v1.JobError.
 * Use `create(JobErrorSchema)` to create a new message.
 */
export declare const JobErrorSchema: GenMessage<JobError>;
/**
 * WatchJobResponse is one item of a job's stream. The last item is a result
 * or an error; the stream then ends with status OK.
 *
 * @generated from message sessiongate.v1.WatchJobResponse
 */
export type WatchJobResponse = Message<"sessiongate.v1.WatchJobResponse"> & {
    /**
     * The item's upstream event_seq: strictly increasing within the stream.
     *
     * @generated from field: uint64 event_seq = 1;
     */
    eventSeq: bigint;
    /**
     * The item.
     *
     * @generated from oneof sessiongate.v1.WatchJobResponse.item
     */
    item: {
        /**
         * An intermediate event.
         *
         * @generated from field: sessiongate.v1.JobEvent event = 2;
         */
        value: JobEvent;
        case: "event";
    } | {
        /**
         * The terminal success.
         *
         * @generated from field: sessiongate.v1.JobResult result = 3;
         */
        value: JobResult;
        case: "result";
    } | {
        /**
         * The terminal failure.
         *
         * @generated from field: sessiongate.v1.JobError error = 4;
         */
        value: JobError;
        case: "error";
    } | {
        case: undefined;
        value?: undefined;
    };
    /**
     * Vendor extensions of the item's envelope ("x-vendor.*"), passed
     * through unchanged.
     *
     * @generated from field: map<string, google.protobuf.Value> extensions = 5;
     */
    extensions: {
        [key: string]: Value;
    };
};
/**
 * Describes the message sessiongate.v1.WatchJobResponse.
 * Use `create(WatchJobResponseSchema)` to create a new message.
 */
export declare const WatchJobResponseSchema: GenMessage<WatchJobResponse>;
/**
 * ListJobsRequest lists a session's jobs.
 *
 * @generated from message sessiongate.v1.ListJobsRequest
 */
export type ListJobsRequest = Message<"sessiongate.v1.ListJobsRequest"> & {
    /**
     * Required. The session id returned by OpenSession.
     *
     * @generated from field: string session_id = 1;
     */
    sessionId: string;
    /**
     * Optional. An AIP-160 filter: comparisons joined by AND, each one of
     *   state = RUNNING            (any JobState name without the prefix;
     *                               several as (state = PENDING OR state = RUNNING))
     *   agent = "echo"             (a name, or "name@version")
     *   create_time > "2026-05-13T00:00:00Z"
     * Any other field or operator is INVALID_ARGUMENT.
     *
     * @generated from field: string filter = 2;
     */
    filter: string;
    /**
     * Optional. Maximum jobs per page: default 50, values above 1000 are
     * treated as 1000; negative is INVALID_ARGUMENT.
     *
     * @generated from field: int32 page_size = 3;
     */
    pageSize: number;
    /**
     * Optional. next_page_token of a previous call. It is opaque and bound to
     * the caller, the session and the filter: one from another caller or
     * session, or with another filter, is INVALID_ARGUMENT.
     *
     * @generated from field: string page_token = 4;
     */
    pageToken: string;
};
/**
 * Describes the message sessiongate.v1.ListJobsRequest.
 * Use `create(ListJobsRequestSchema)` to create a new message.
 */
export declare const ListJobsRequestSchema: GenMessage<ListJobsRequest>;
/**
 * ListJobsResponse is one page of jobs, in acceptance order.
 *
 * @generated from message sessiongate.v1.ListJobsResponse
 */
export type ListJobsResponse = Message<"sessiongate.v1.ListJobsResponse"> & {
    /**
     * The jobs of this page.
     *
     * @generated from field: repeated sessiongate.v1.Job jobs = 1;
     */
    jobs: Job[];
    /**
     * Token for the next page; empty on the last page.
     *
     * @generated from field: string next_page_token = 2;
     */
    nextPageToken: string;
};
/**
 * Describes the message sessiongate.v1.ListJobsResponse.
 * Use `create(ListJobsResponseSchema)` to create a new message.
 */
export declare const ListJobsResponseSchema: GenMessage<ListJobsResponse>;
/**
 * SubscribeJobRequest attaches a session to a job of another session.
 *
 * @generated from message sessiongate.v1.SubscribeJobRequest
 */
export type SubscribeJobRequest = Message<"sessiongate.v1.SubscribeJobRequest"> & {
    /**
     * Required. The session that attaches (the observer).
     *
     * @generated from field: string session_id = 1;
     */
    sessionId: string;
    /**
     * Required. The job to attach to; it may belong to another session of
     * the same caller on the same runtime.
     *
     * @generated from field: string job_id = 2;
     */
    jobId: string;
    /**
     * Optional. Replay the job's buffered events (the runtime's resume
     * buffer) before live ones. Default false: live events only.
     *
     * @generated from field: bool history = 3;
     */
    history: boolean;
    /**
     * Optional, with history: replay only events with event_seq greater than
     * this, in the numbering of the session that submitted the job (0 = all
     * buffered). Replayed and live events are renumbered in this session's
     * event_seq; WatchJob sees them so.
     *
     * @generated from field: uint64 from_event_seq = 4;
     */
    fromEventSeq: bigint;
};
/**
 * Describes the message sessiongate.v1.SubscribeJobRequest.
 * Use `create(SubscribeJobRequestSchema)` to create a new message.
 */
export declare const SubscribeJobRequestSchema: GenMessage<SubscribeJobRequest>;
/**
 * SubscribeJobResponse is the job's authority descriptor (§7.6). Every
 * field is output only.
 *
 * @generated from message sessiongate.v1.SubscribeJobResponse
 */
export type SubscribeJobResponse = Message<"sessiongate.v1.SubscribeJobResponse"> & {
    /**
     * The job as the runtime describes it to an observer: state, agent,
     * lease, constraints, current budget, parent, trace id.
     *
     * @generated from field: sessiongate.v1.Job job = 1;
     */
    job?: Job | undefined;
    /**
     * The event_seq the subscription starts from, when the runtime says.
     *
     * @generated from field: uint64 subscribed_from = 2;
     */
    subscribedFrom: bigint;
    /**
     * Whether buffered history was replayed.
     *
     * @generated from field: bool replayed = 3;
     */
    replayed: boolean;
};
/**
 * Describes the message sessiongate.v1.SubscribeJobResponse.
 * Use `create(SubscribeJobResponseSchema)` to create a new message.
 */
export declare const SubscribeJobResponseSchema: GenMessage<SubscribeJobResponse>;
/**
 * SessionStatus is the answer of the liveness probe.
 *
 * @generated from enum sessiongate.v1.SessionStatus
 */
export declare enum SessionStatus {
    /**
     * @generated from enum value: SESSION_STATUS_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * The gateway is handling this session for the caller; session methods work.
     *
     * @generated from enum value: SESSION_STATUS_LIVE = 1;
     */
    LIVE = 1,
    /**
     * No such session for this caller (never opened, closed, lost, or another
     * caller's).
     *
     * @generated from enum value: SESSION_STATUS_NOT_FOUND = 2;
     */
    NOT_FOUND = 2
}
/**
 * Describes the enum sessiongate.v1.SessionStatus.
 */
export declare const SessionStatusSchema: GenEnum<SessionStatus>;
/**
 * SessionPhase is where a live session's upstream connection stands.
 *
 * @generated from enum sessiongate.v1.SessionPhase
 */
export declare enum SessionPhase {
    /**
     * @generated from enum value: SESSION_PHASE_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * Connected and handshaken; calls go straight through.
     *
     * @generated from enum value: SESSION_PHASE_READY = 1;
     */
    READY = 1,
    /**
     * The upstream transport dropped and is being resumed; calls wait for it.
     *
     * @generated from enum value: SESSION_PHASE_RECONNECTING = 2;
     */
    RECONNECTING = 2,
    /**
     * The session is being closed.
     *
     * @generated from enum value: SESSION_PHASE_CLOSING = 3;
     */
    CLOSING = 3
}
/**
 * Describes the enum sessiongate.v1.SessionPhase.
 */
export declare const SessionPhaseSchema: GenEnum<SessionPhase>;
/**
 * JobState is where a job stands (ARCP status / final_status).
 *
 * @generated from enum sessiongate.v1.JobState
 */
export declare enum JobState {
    /**
     * @generated from enum value: JOB_STATE_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * Accepted, not yet running ("pending").
     *
     * @generated from enum value: JOB_STATE_PENDING = 1;
     */
    PENDING = 1,
    /**
     * Running ("running").
     *
     * @generated from enum value: JOB_STATE_RUNNING = 2;
     */
    RUNNING = 2,
    /**
     * Ended with a result ("success").
     *
     * @generated from enum value: JOB_STATE_SUCCEEDED = 3;
     */
    SUCCEEDED = 3,
    /**
     * Ended with an error ("error"), including LEASE_EXPIRED and
     * BUDGET_EXHAUSTED.
     *
     * @generated from enum value: JOB_STATE_FAILED = 4;
     */
    FAILED = 4,
    /**
     * Cancelled ("cancelled").
     *
     * @generated from enum value: JOB_STATE_CANCELLED = 5;
     */
    CANCELLED = 5,
    /**
     * Ran past its max_runtime_sec ("timed_out").
     *
     * @generated from enum value: JOB_STATE_TIMED_OUT = 6;
     */
    TIMED_OUT = 6
}
/**
 * Describes the enum sessiongate.v1.JobState.
 */
export declare const JobStateSchema: GenEnum<JobState>;
/**
 * SessionStatusView selects the fields of GetSessionStatusResponse.
 *
 * @generated from enum sessiongate.v1.SessionStatusView
 */
export declare enum SessionStatusView {
    /**
     * FULL.
     *
     * @generated from enum value: SESSION_STATUS_VIEW_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * status, phase, last_event_seq, generation and instance_id: what a
     * balancer routes on, without the strings of runtime and features.
     *
     * @generated from enum value: SESSION_STATUS_VIEW_BASIC = 1;
     */
    BASIC = 1,
    /**
     * Every field.
     *
     * @generated from enum value: SESSION_STATUS_VIEW_FULL = 2;
     */
    FULL = 2
}
/**
 * Describes the enum sessiongate.v1.SessionStatusView.
 */
export declare const SessionStatusViewSchema: GenEnum<SessionStatusView>;
/**
 * SessionGateway opens sessions on ARCP runtimes and runs jobs through them.
 * Every method runs under a timeout profile; see timeoutprofile.v1.
 *
 * @generated from service sessiongate.v1.SessionGateway
 */
export declare const SessionGateway: GenService<{
    /**
     * OpenSession opens a session on a runtime and binds it to the caller.
     *
     * @generated from rpc sessiongate.v1.SessionGateway.OpenSession
     */
    openSession: {
        methodKind: "unary";
        input: typeof OpenSessionRequestSchema;
        output: typeof OpenSessionResponseSchema;
    };
    /**
     * GetSessionStatus is a side-effect-free liveness probe: LIVE or
     * NOT_FOUND as a normal response, answered from memory.
     *
     * @generated from rpc sessiongate.v1.SessionGateway.GetSessionStatus
     */
    getSessionStatus: {
        methodKind: "unary";
        input: typeof GetSessionStatusRequestSchema;
        output: typeof GetSessionStatusResponseSchema;
    };
    /**
     * CloseSession closes a session gracefully upstream.
     *
     * @generated from rpc sessiongate.v1.SessionGateway.CloseSession
     */
    closeSession: {
        methodKind: "unary";
        input: typeof CloseSessionRequestSchema;
        output: typeof CloseSessionResponseSchema;
    };
    /**
     * ListSessions lists the caller's sessions.
     *
     * @generated from rpc sessiongate.v1.SessionGateway.ListSessions
     */
    listSessions: {
        methodKind: "unary";
        input: typeof ListSessionsRequestSchema;
        output: typeof ListSessionsResponseSchema;
    };
    /**
     * SubmitJob submits a job and returns once the runtime accepted it.
     *
     * @generated from rpc sessiongate.v1.SessionGateway.SubmitJob
     */
    submitJob: {
        methodKind: "unary";
        input: typeof SubmitJobRequestSchema;
        output: typeof SubmitJobResponseSchema;
    };
    /**
     * RunJob submits a job and waits for its terminal result. On timeout or
     * caller cancellation the job is cancelled upstream.
     *
     * @generated from rpc sessiongate.v1.SessionGateway.RunJob
     */
    runJob: {
        methodKind: "unary";
        input: typeof RunJobRequestSchema;
        output: typeof RunJobResponseSchema;
    };
    /**
     * CancelJob asks the runtime to cancel a job. A job that had already
     * ended is FAILED_PRECONDITION with ErrorInfo reason JOB_ALREADY_ENDED and
     * its final_status: nothing was cancelled.
     *
     * @generated from rpc sessiongate.v1.SessionGateway.CancelJob
     */
    cancelJob: {
        methodKind: "unary";
        input: typeof CancelJobRequestSchema;
        output: typeof CancelJobResponseSchema;
    };
    /**
     * WatchJob streams a job's events in event_seq order, ending with its
     * terminal result or error. From a finished job's terminal event_seq the
     * stream is the terminal alone; past it, OUT_OF_RANGE with ErrorInfo
     * reason EVENT_SEQ_OUT_OF_RANGE naming the last event_seq.
     *
     * @generated from rpc sessiongate.v1.SessionGateway.WatchJob
     */
    watchJob: {
        methodKind: "server_streaming";
        input: typeof WatchJobRequestSchema;
        output: typeof WatchJobResponseSchema;
    };
    /**
     * ListJobs lists the caller's jobs that the session's runtime reports
     * (ARCP session.list_jobs, §6.6): only jobs submitted, subscribed to or
     * adopted through the caller's sessions, whatever the runtime's scope. A
     * page at a time (AIP-132, AIP-158, AIP-160): a page may hold fewer than
     * page_size jobs while next_page_token is set. Needs the list_jobs
     * feature (FAILED_PRECONDITION otherwise).
     *
     * @generated from rpc sessiongate.v1.SessionGateway.ListJobs
     */
    listJobs: {
        methodKind: "unary";
        input: typeof ListJobsRequestSchema;
        output: typeof ListJobsResponseSchema;
    };
    /**
     * SubscribeJob attaches the session to a job submitted through another
     * session of the same caller (ARCP job.subscribe, §7.6-7.7), optionally
     * with the job's buffered history. Afterwards WatchJob works for the job
     * in this session; CancelJob does not (a subscriber only observes). Needs
     * the subscribe feature (FAILED_PRECONDITION otherwise).
     *
     * @generated from rpc sessiongate.v1.SessionGateway.SubscribeJob
     */
    subscribeJob: {
        methodKind: "unary";
        input: typeof SubscribeJobRequestSchema;
        output: typeof SubscribeJobResponseSchema;
    };
}>;
