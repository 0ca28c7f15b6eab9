/** The ErrorInfo reasons of an UNAVAILABLE that a watch resumes after. */
export declare const RESUMABLE_REASONS: ReadonlySet<string>;
/**
 * Whether err is a stream reset by the transport (a balancer whose upstream
 * died mid-response): INTERNAL, no ErrorInfo (the gateway's own INTERNAL
 * errors always carry one), and the RST_STREAM INTERNAL_ERROR text.
 */
export declare function streamReset(err: unknown): boolean;
/** How many times a unary call is sent again after stream resets. */
export declare const MAX_RESET_RESENDS = 2;
/** The pause (ms) before re-send attempt (0-based) after a stream reset. */
export declare const resetBackoffMs: (attempt: number) => number;
/**
 * Whether a unary call may be sent again after a stream reset (it may have
 * run): reads, and RunJob/SubmitJob with an idempotency key (the client
 * gives every call one), whose re-send gets the job the first created.
 */
export declare function resendSafe(method: string, req: unknown): boolean;
/** Whether a watch cut by err may be re-opened from its cursor. */
export declare function resumable(err: unknown): boolean;
/** How a watch resumes itself (WatchOptions.resume; false turns it off). */
export interface ResumePolicy {
    /** Re-opens in a row without an item in between (default 10). */
    maxAttempts?: number;
    /** The first backoff (default 50 ms); it doubles up to maxBackoffMs. */
    initialBackoffMs?: number;
    /** The longest backoff (default 2000 ms). */
    maxBackoffMs?: number;
}
/** The resume rules of one watch (sans I/O). deadline is in Date.now() ms, undefined for none. */
export declare class Resumer {
    #private;
    cursor: number;
    /** Re-opens so far. */
    resumes: number;
    constructor(fromEventSeq: number, policy: ResumePolicy | undefined, deadline?: number, rand?: () => number);
    /** Whether the terminal item was delivered. */
    get done(): boolean;
    /** An item arrived: true if the caller should see it, false for a duplicate. */
    deliver(eventSeq: number, terminal: boolean): boolean;
    /** The stream failed with err at now: the delay (ms) before re-opening from cursor, or undefined to throw err. */
    cut(err: unknown, now: number): number | undefined;
    /** The time left before the deadline, in ms (undefined without one). */
    remaining(now: number): number | undefined;
}
