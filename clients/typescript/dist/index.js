/**
 * TypeScript client for sessiongate, a gRPC gateway to ARCP agent runtimes,
 * over @grpc/grpc-js.
 *
 * ```ts
 * import { Gateway } from "@sessiongate/client";
 *
 * using gw = new Gateway("127.0.0.1:50051");
 * await using s = await gw.openSession({ clientName: "example" });
 * const { result } = await s.run("echo", { hello: "world" }, { timeoutMs: 5000 });
 * ```
 *
 * Job input and results are plain JSON values (numbers are doubles, as in
 * JavaScript); uint64 fields (eventSeq, lastEventSeq, generation) are numbers,
 * so results serialise with JSON.stringify; enums are lower-case strings
 * ("live", "ready"). A watch re-opens itself after a cut (see
 * WatchOptions.resume). The generated messages are exported as `pb` for
 * anything the helpers do not cover.
 *
 * @module
 */
export { Gateway, Session, SESSION_METADATA_KEY, TIMEOUT_METADATA_KEY, TRACEPARENT_METADATA_KEY, isTraceparent, } from "./client.js";
export { RESUMABLE_REASONS, resumable, streamReset } from "./resume.js";
export { DEFAULT_SILENCE_AFTER_MS, DEFAULT_SILENCE_TIMEOUT_MS, REASON_REPLICA_SILENT, } from "./silence.js";
export { AbortedError, AlreadyExistsError, CancelledError, ClientClosedError, DataLossError, DeadlineExceededError, FailedPreconditionError, GatewayError, InternalError, InvalidArgumentError, NotFoundError, OutOfRangeError, PermissionDeniedError, ResourceExhaustedError, TimeoutExceededError, UnauthenticatedError, UnavailableError, UnimplementedError, UnknownError, } from "./errors.js";
export { retryServiceConfig } from "./gen/retry_service_config.js";
export { fromRawOrValue, fromValue, toValue } from "./values.js";
export * as pb from "./gen/sessiongate/v1/sessiongate_pb.js";
//# sourceMappingURL=index.js.map