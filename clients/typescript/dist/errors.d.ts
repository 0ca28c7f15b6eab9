import { status as Code, type ServiceError } from "@grpc/grpc-js";
import { type TimeoutExceeded } from "./gen/timeoutprofile/v1/timeoutprofile_pb.js";
/** The name of a gRPC status code, e.g. "DEADLINE_EXCEEDED". */
export type CodeName = keyof typeof Code;
/** The ErrorInfo fields a GatewayError carries. */
export interface ErrorInfo {
    reason?: string;
    domain?: string;
    metadata?: Record<string, string>;
}
/** A call to the gateway failed with a gRPC status. */
export declare class GatewayError extends Error {
    /** The gRPC status code surfaced (see grpcCode). */
    readonly code: Code;
    /** The status code's name, e.g. "NOT_FOUND". */
    readonly codeName: CodeName;
    /** The ErrorInfo's reason, e.g. "SESSION_NOT_FOUND"; undefined without one. */
    readonly reason?: string;
    /** The ErrorInfo's domain: "sessiongate", "timeoutprofile" or "arcp". */
    readonly domain?: string;
    /** The ErrorInfo's metadata (empty without one). */
    readonly metadata: Record<string, string>;
    /**
     * The code gRPC reported, when it differs from code: a call whose own
     * deadline had passed but that grpc-js reported CANCELLED (the server reset
     * the stream as the deadline passed, and won the race against the client's
     * timer) is surfaced as DEADLINE_EXCEEDED with grpcCode CANCELLED.
     */
    readonly grpcCode: Code;
    constructor(code: Code, message: string, info?: ErrorInfo, grpcCode?: Code);
    /** The runtime's retryable hint from the ErrorInfo, if it gave one. */
    get retryable(): boolean | undefined;
}
/** INVALID_ARGUMENT: a missing or malformed field, or a bad x-timeout-ms. */
export declare class InvalidArgumentError extends GatewayError {
}
/** NOT_FOUND: unknown session, job, runtime or agent (see reason). */
export declare class NotFoundError extends GatewayError {
}
/** ALREADY_EXISTS. */
export declare class AlreadyExistsError extends GatewayError {
}
/** PERMISSION_DENIED. */
export declare class PermissionDeniedError extends GatewayError {
}
/** UNAUTHENTICATED: a missing or unknown bearer token. */
export declare class UnauthenticatedError extends GatewayError {
}
/** RESOURCE_EXHAUSTED: a cap (metadata.cap) or a slow consumer. */
export declare class ResourceExhaustedError extends GatewayError {
}
/** FAILED_PRECONDITION. */
export declare class FailedPreconditionError extends GatewayError {
}
/** UNAVAILABLE: draining, unreachable, or the session was lost. */
export declare class UnavailableError extends GatewayError {
}
/** INTERNAL. */
export declare class InternalError extends GatewayError {
}
/** CANCELLED: the call, or the job it waited for, was cancelled. */
export declare class CancelledError extends GatewayError {
}
/**
 * A call made on a closed Gateway (nothing was sent): code CANCELLED, reason
 * "CLIENT_CLOSED", domain "sessiongate.client". A watch cut after close()
 * does not re-open; it rejects with this.
 */
export declare class ClientClosedError extends CancelledError {
    constructor(message?: string);
}
/** DEADLINE_EXCEEDED without the gateway's details: the caller's own timer fired first. */
export declare class DeadlineExceededError extends GatewayError {
}
/** UNKNOWN: an error without a status, e.g. from a proxy. */
export declare class UnknownError extends GatewayError {
}
/** ABORTED: the job ended with an error of its own (the ARCP code is reason, e.g. "INTERNAL_ERROR"). */
export declare class AbortedError extends GatewayError {
}
/** OUT_OF_RANGE. */
export declare class OutOfRangeError extends GatewayError {
}
/** UNIMPLEMENTED: a method this gateway does not serve. */
export declare class UnimplementedError extends GatewayError {
}
/** DATA_LOSS. */
export declare class DataLossError extends GatewayError {
}
/** DEADLINE_EXCEEDED with the gateway's timeoutprofile.v1.TimeoutExceeded detail. */
export declare class TimeoutExceededError extends DeadlineExceededError {
    /** The timeout profile the call ran under, e.g. "tool_call". */
    readonly profile: string;
    /** The budget that ran out, in milliseconds. */
    readonly configuredMs: number;
    /** Time elapsed when it fired, in milliseconds. */
    readonly elapsedMs: number;
    /** Which limit fired: "unary", "caller_deadline", "initial", "gap" or "total". */
    readonly limit: string;
    /** The call's service, e.g. "sessiongate.v1.SessionGateway". */
    readonly service: string;
    /** The call's method, e.g. "RunJob". */
    readonly method: string;
    constructor(message: string, detail: TimeoutExceeded, info?: ErrorInfo);
}
/**
 * fromServiceError returns the typed error for a failed grpc-js call.
 * deadlinePassed says whether the call's own deadline had passed when it
 * ended (see GatewayError.grpcCode).
 */
export declare function fromServiceError(err: ServiceError, deadlinePassed?: boolean): GatewayError;
