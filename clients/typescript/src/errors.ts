// Typed errors: every failed call rejects with a GatewayError subclass chosen
// by its gRPC status code, with the google.rpc.ErrorInfo and
// timeoutprofile.v1.TimeoutExceeded details decoded.

import { fromBinary } from "@bufbuild/protobuf";
import { status as Code, type ServiceError } from "@grpc/grpc-js";

import { ErrorInfoSchema } from "./gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "./gen/google/rpc/status_pb.js";
import { TimeoutExceededSchema, type TimeoutExceeded } from "./gen/timeoutprofile/v1/timeoutprofile_pb.js";

const ERROR_INFO_URL = "type.googleapis.com/google.rpc.ErrorInfo";
const TIMEOUT_EXCEEDED_URL = "type.googleapis.com/timeoutprofile.v1.TimeoutExceeded";

/** The name of a gRPC status code, e.g. "DEADLINE_EXCEEDED". */
export type CodeName = keyof typeof Code;

/** The ErrorInfo fields a GatewayError carries. */
export interface ErrorInfo {
  reason?: string;
  domain?: string;
  metadata?: Record<string, string>;
}

/** A call to the gateway failed with a gRPC status. */
export class GatewayError extends Error {
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

  constructor(code: Code, message: string, info: ErrorInfo = {}, grpcCode: Code = code) {
    super(message);
    this.name = new.target.name;
    this.code = code;
    this.codeName = Code[code] as CodeName;
    this.reason = info.reason;
    this.domain = info.domain;
    this.metadata = { ...info.metadata };
    this.grpcCode = grpcCode;
  }

  /** The runtime's retryable hint from the ErrorInfo, if it gave one. */
  get retryable(): boolean | undefined {
    const v = this.metadata["retryable"];
    return v === undefined ? undefined : v === "true";
  }
}

/** INVALID_ARGUMENT: a missing or malformed field, or a bad x-timeout-ms. */
export class InvalidArgumentError extends GatewayError {}
/** NOT_FOUND: unknown session, job, runtime or agent (see reason). */
export class NotFoundError extends GatewayError {}
/** ALREADY_EXISTS. */
export class AlreadyExistsError extends GatewayError {}
/** PERMISSION_DENIED. */
export class PermissionDeniedError extends GatewayError {}
/** UNAUTHENTICATED: a missing or unknown bearer token. */
export class UnauthenticatedError extends GatewayError {}
/** RESOURCE_EXHAUSTED: a cap (metadata.cap) or a slow consumer. */
export class ResourceExhaustedError extends GatewayError {}
/** FAILED_PRECONDITION. */
export class FailedPreconditionError extends GatewayError {}
/** UNAVAILABLE: draining, unreachable, or the session was lost. */
export class UnavailableError extends GatewayError {}
/** INTERNAL. */
export class InternalError extends GatewayError {}
/** CANCELLED: the call, or the job it waited for, was cancelled. */
export class CancelledError extends GatewayError {}
/**
 * A call made on a closed Gateway (nothing was sent): code CANCELLED, reason
 * "CLIENT_CLOSED", domain "sessiongate.client". A watch cut after close()
 * does not re-open; it rejects with this.
 */
export class ClientClosedError extends CancelledError {
  constructor(message = "the Gateway is closed") {
    super(Code.CANCELLED, message, { reason: "CLIENT_CLOSED", domain: "sessiongate.client" });
  }
}
/** DEADLINE_EXCEEDED without the gateway's details: the caller's own timer fired first. */
export class DeadlineExceededError extends GatewayError {}
/** UNKNOWN: an error without a status, e.g. from a proxy. */
export class UnknownError extends GatewayError {}
/** ABORTED: the job ended with an error of its own (the ARCP code is reason, e.g. "INTERNAL_ERROR"). */
export class AbortedError extends GatewayError {}
/** OUT_OF_RANGE. */
export class OutOfRangeError extends GatewayError {}
/** UNIMPLEMENTED: a method this gateway does not serve. */
export class UnimplementedError extends GatewayError {}
/** DATA_LOSS. */
export class DataLossError extends GatewayError {}

/** DEADLINE_EXCEEDED with the gateway's timeoutprofile.v1.TimeoutExceeded detail. */
export class TimeoutExceededError extends DeadlineExceededError {
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

  constructor(message: string, detail: TimeoutExceeded, info: ErrorInfo = {}) {
    super(Code.DEADLINE_EXCEEDED, message, info);
    this.profile = detail.profileName;
    this.configuredMs = detail.configuredTimeoutMs;
    this.elapsedMs = detail.elapsedMs;
    this.limit = detail.limit;
    this.service = detail.service;
    this.method = detail.method;
  }
}

const byCode = new Map<Code, new (code: Code, message: string, info?: ErrorInfo, grpcCode?: Code) => GatewayError>([
  [Code.INVALID_ARGUMENT, InvalidArgumentError],
  [Code.NOT_FOUND, NotFoundError],
  [Code.ALREADY_EXISTS, AlreadyExistsError],
  [Code.PERMISSION_DENIED, PermissionDeniedError],
  [Code.UNAUTHENTICATED, UnauthenticatedError],
  [Code.RESOURCE_EXHAUSTED, ResourceExhaustedError],
  [Code.FAILED_PRECONDITION, FailedPreconditionError],
  [Code.UNAVAILABLE, UnavailableError],
  [Code.INTERNAL, InternalError],
  [Code.CANCELLED, CancelledError],
  [Code.DEADLINE_EXCEEDED, DeadlineExceededError],
  [Code.UNKNOWN, UnknownError],
  [Code.ABORTED, AbortedError],
  [Code.OUT_OF_RANGE, OutOfRangeError],
  [Code.UNIMPLEMENTED, UnimplementedError],
  [Code.DATA_LOSS, DataLossError],
]);

/**
 * fromServiceError returns the typed error for a failed grpc-js call.
 * deadlinePassed says whether the call's own deadline had passed when it
 * ended (see GatewayError.grpcCode).
 */
export function fromServiceError(err: ServiceError, deadlinePassed = false): GatewayError {
  let info: ErrorInfo = {};
  let timeout: TimeoutExceeded | undefined;
  for (const raw of err.metadata?.get("grpc-status-details-bin") ?? []) {
    if (typeof raw === "string") continue;
    const st = fromBinary(StatusSchema, raw);
    for (const any of st.details) {
      if (any.typeUrl === ERROR_INFO_URL && info.reason === undefined) {
        const ei = fromBinary(ErrorInfoSchema, any.value);
        info = { reason: ei.reason, domain: ei.domain, metadata: ei.metadata };
      } else if (any.typeUrl === TIMEOUT_EXCEEDED_URL && timeout === undefined) {
        timeout = fromBinary(TimeoutExceededSchema, any.value);
      }
    }
  }
  const message = err.details || err.message;
  if (err.code === Code.DEADLINE_EXCEEDED && timeout !== undefined) {
    return new TimeoutExceededError(message, timeout, info);
  }
  if (err.code === Code.CANCELLED && deadlinePassed) {
    return new DeadlineExceededError(Code.DEADLINE_EXCEEDED, `deadline exceeded (${message})`, info, Code.CANCELLED);
  }
  const ctor = byCode.get(err.code) ?? GatewayError;
  return new ctor(err.code, message, info);
}
