import { UnavailableError } from "./errors.js";
/** How long a watch waits for a message before it health-checks its replica. */
export declare const DEFAULT_SILENCE_AFTER_MS = 500;
/** How long that health check may go unanswered before the replica is silent. */
export declare const DEFAULT_SILENCE_TIMEOUT_MS = 1000;
/** The ErrorInfo reason of a watch given up on a silent replica. */
export declare const REASON_REPLICA_SILENT = "REPLICA_SILENT";
/** The health check's method. */
export declare const HEALTH_CHECK_PATH = "/grpc.health.v1.Health/Check";
/** The silence bound of watches (GatewayOptions.silenceBound). */
export interface SilenceBound {
    /** Quiet time before a health check (default DEFAULT_SILENCE_AFTER_MS). */
    afterMs?: number;
    /** Time the check may go unanswered (default DEFAULT_SILENCE_TIMEOUT_MS). */
    timeoutMs?: number;
}
/** The bound with its defaults, validated. */
export declare function silenceBound(b: SilenceBound): Required<SilenceBound>;
/** The UNAVAILABLE REPLICA_SILENT a watch's stream ends with. */
export declare function replicaSilentError(b: Required<SilenceBound>): UnavailableError;
/** A health check in flight: done(silent) is called once, unless cancelled first. */
export type HealthCheck = (done: (silent: boolean) => void) => {
    cancel(): void;
};
/**
 * The bound of one stream: a timer that starts a health check once the
 * stream has been quiet for afterMs, and cancels the stream when the replica
 * is silent. received() notes a message; stop() ends the timer and any check.
 */
export declare class StreamSilence {
    #private;
    /** Set when the replica was found silent (the stream was then cancelled). */
    silent: boolean;
    constructor(bound: Required<SilenceBound>, check: HealthCheck, cancel: () => void);
    received(): void;
    stop(): void;
}
