// When a cut watch re-opens itself: the rules, apart from any I/O.
//
// A WatchJob stream can end without the job's end: the session was handed
// off to another replica (UNAVAILABLE, reason SESSION_HANDED_OFF), its owner
// could not be reached (OWNER_UNREACHABLE, NOT_OWNER, DIRECTORY_UNAVAILABLE),
// the gateway drains (DRAINING), the client's silence bound gave up on a
// frozen replica (REPLICA_SILENT), the connection dropped (UNAVAILABLE
// without ErrorInfo), or a balancer reset the stream because the replica
// behind it died (INTERNAL without ErrorInfo whose message is the
// transport's RST_STREAM text: nginx resets with INTERNAL_ERROR when its
// upstream dies mid-response; see streamReset). The gateway delivers a job's items exactly once from
// from_event_seq, so the client re-opens the watch from the last eventSeq it
// delivered:
//
// - only on those causes (resumable); any other error ends the watch;
// - never after the terminal item (result or error);
// - after a backoff that doubles from initialBackoffMs to maxBackoffMs
//   (jittered) and starts again once an item arrived;
// - at most maxAttempts times in a row without an item in between;
// - only while the caller's deadline leaves time for the backoff, else the
//   cut's own error is thrown;
// - an item at or below the cursor (a duplicate) is dropped, so the caller
//   sees every eventSeq once, in increasing order.
//
// Resumer holds these rules; Session.watch feeds it what happened and does
// what it answers. The same rules are in the Python (sessiongate/_resume.py)
// and Go (client/resume.go) clients.

import { GatewayError } from "./errors.js";

/** The ErrorInfo reasons of an UNAVAILABLE that a watch resumes after. */
export const RESUMABLE_REASONS: ReadonlySet<string> = new Set([
  "SESSION_HANDED_OFF",
  "OWNER_UNREACHABLE",
  "NOT_OWNER",
  "DIRECTORY_UNAVAILABLE",
  "DRAINING",
  "REPLICA_SILENT",
]);

const INTERNAL = 13;
const UNAVAILABLE = 14;

// The texts gRPC libraries give a stream that the peer reset with HTTP/2
// RST_STREAM INTERNAL_ERROR (code 2): @grpc/grpc-js "Received RST_STREAM
// with code 2", grpcio "Received RST_STREAM with error code 2", grpc-go
// "stream terminated by RST_STREAM with error code: INTERNAL_ERROR".
const RST_INTERNAL = /RST_STREAM with (?:error )?code:? (?:2|INTERNAL_ERROR)\b/;

/**
 * Whether err is a stream reset by the transport (a balancer whose upstream
 * died mid-response): INTERNAL, no ErrorInfo (the gateway's own INTERNAL
 * errors always carry one), and the RST_STREAM INTERNAL_ERROR text.
 */
export function streamReset(err: unknown): boolean {
  return err instanceof GatewayError && err.code === INTERNAL && !err.reason && RST_INTERNAL.test(err.message);
}

/** How many times a unary call is sent again after stream resets. */
export const MAX_RESET_RESENDS = 2;

/** The pause (ms) before re-send attempt (0-based) after a stream reset. */
export const resetBackoffMs = (attempt: number): number => 50 * 2 ** attempt;

/**
 * Whether a unary call may be sent again after a stream reset (it may have
 * run): reads, and RunJob/SubmitJob with an idempotency key (the client
 * gives every call one), whose re-send gets the job the first created.
 */
export function resendSafe(method: string, req: unknown): boolean {
  if (method === "GetSessionStatus" || method === "ListSessions" || method === "ListJobs") return true;
  return (method === "RunJob" || method === "SubmitJob") && !!(req as { idempotencyKey?: string }).idempotencyKey;
}

/** Whether a watch cut by err may be re-opened from its cursor. */
export function resumable(err: unknown): boolean {
  if (streamReset(err)) return true;
  if (!(err instanceof GatewayError) || err.code !== UNAVAILABLE) return false;
  return !err.reason || RESUMABLE_REASONS.has(err.reason);
}

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
export class Resumer {
  cursor: number;
  /** Re-opens so far. */
  resumes = 0;
  #failures = 0;
  #done = false;
  readonly #policy?: Required<ResumePolicy>;
  readonly #deadline?: number;
  readonly #rand: () => number;

  constructor(fromEventSeq: number, policy: ResumePolicy | undefined, deadline?: number, rand: () => number = Math.random) {
    this.cursor = fromEventSeq;
    if (policy) {
      const p = { maxAttempts: 10, initialBackoffMs: 50, maxBackoffMs: 2000, ...policy };
      if (!(p.maxAttempts >= 1 && p.initialBackoffMs > 0 && p.maxBackoffMs >= p.initialBackoffMs)) {
        throw new RangeError("ResumePolicy needs maxAttempts >= 1 and 0 < initialBackoffMs <= maxBackoffMs");
      }
      this.#policy = p;
    }
    this.#deadline = deadline;
    this.#rand = rand;
  }

  /** Whether the terminal item was delivered. */
  get done(): boolean {
    return this.#done;
  }

  /** An item arrived: true if the caller should see it, false for a duplicate. */
  deliver(eventSeq: number, terminal: boolean): boolean {
    if (this.#done || eventSeq <= this.cursor) return false;
    this.cursor = eventSeq;
    this.#failures = 0;
    this.#done = terminal;
    return true;
  }

  /** The stream failed with err at now: the delay (ms) before re-opening from cursor, or undefined to throw err. */
  cut(err: unknown, now: number): number | undefined {
    const p = this.#policy;
    if (!p || this.#done || !resumable(err) || this.#failures >= p.maxAttempts) return undefined;
    const cap = Math.min(p.maxBackoffMs, p.initialBackoffMs * 2 ** this.#failures);
    const delay = cap * (0.5 + 0.5 * this.#rand());
    if (this.#deadline !== undefined && now + delay >= this.#deadline) return undefined;
    this.#failures++;
    this.resumes++;
    return delay;
  }

  /** The time left before the deadline, in ms (undefined without one). */
  remaining(now: number): number | undefined {
    return this.#deadline === undefined ? undefined : Math.max(1, this.#deadline - now);
  }
}
