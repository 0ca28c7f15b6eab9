// The silence bound of a watch: leave a replica that went silent.
//
// A frozen replica (SIGSTOP, a VM pause, a stop-the-world stall) keeps its
// connections open and answers nothing; behind a balancer the client's
// keepalive pings are answered by the balancer, so a watch on it would wait
// for the thaw. The rule is the Go client's (client/silence.go):
//
// - a WatchJob stream that has received nothing for afterMs
//   (DEFAULT_SILENCE_AFTER_MS, 500 ms) health-checks its replica
//   (grpc.health.v1.Health/Check), at most once per afterMs;
// - no answer within timeoutMs (DEFAULT_SILENCE_TIMEOUT_MS, 1000 ms) makes the
//   replica silent: the stream is cancelled and ends UNAVAILABLE with reason
//   REPLICA_SILENT, which the watch resumes after, from its cursor;
// - any answer, an error status included, means alive: a long quiet job is
//   never cut.
//
// The health check goes over the Gateway's channel with the session's
// x-sessiongate-session header, so a balancer that hashes on it (the nginx
// recipe) sends it to the watch's replica. GatewayOptions.silenceBound tunes
// the bound; false turns it off.
import { status as Code } from "@grpc/grpc-js";
import { UnavailableError } from "./errors.js";
/** How long a watch waits for a message before it health-checks its replica. */
export const DEFAULT_SILENCE_AFTER_MS = 500;
/** How long that health check may go unanswered before the replica is silent. */
export const DEFAULT_SILENCE_TIMEOUT_MS = 1000;
/** The ErrorInfo reason of a watch given up on a silent replica. */
export const REASON_REPLICA_SILENT = "REPLICA_SILENT";
/** The health check's method. */
export const HEALTH_CHECK_PATH = "/grpc.health.v1.Health/Check";
/** The bound with its defaults, validated. */
export function silenceBound(b) {
    const r = { afterMs: DEFAULT_SILENCE_AFTER_MS, timeoutMs: DEFAULT_SILENCE_TIMEOUT_MS, ...b };
    if (!(r.afterMs > 0 && r.timeoutMs > 0))
        throw new RangeError("SilenceBound needs afterMs > 0 and timeoutMs > 0");
    return r;
}
/** The UNAVAILABLE REPLICA_SILENT a watch's stream ends with. */
export function replicaSilentError(b) {
    return new UnavailableError(Code.UNAVAILABLE, `sessiongate: the replica of the watch sent nothing for ${b.afterMs} ms and answered no health check within ${b.timeoutMs} ms: watch again from your last eventSeq`, { reason: REASON_REPLICA_SILENT, domain: "sessiongate", metadata: { retryable: "true" } });
}
/**
 * The bound of one stream: a timer that starts a health check once the
 * stream has been quiet for afterMs, and cancels the stream when the replica
 * is silent. received() notes a message; stop() ends the timer and any check.
 */
export class StreamSilence {
    /** Set when the replica was found silent (the stream was then cancelled). */
    silent = false;
    #last = Date.now();
    #ended = false;
    #timer;
    #checking;
    #bound;
    #check;
    #cancel;
    constructor(bound, check, cancel) {
        this.#bound = bound;
        this.#check = check;
        this.#cancel = cancel;
        this.#schedule(bound.afterMs);
    }
    received() {
        this.#last = Date.now();
    }
    stop() {
        this.#ended = true;
        clearTimeout(this.#timer);
        this.#checking?.cancel();
    }
    #schedule(ms) {
        this.#timer = setTimeout(() => this.#tick(), ms);
    }
    #tick() {
        if (this.#ended)
            return;
        const after = this.#bound.afterMs;
        const quiet = Date.now() - this.#last;
        if (quiet < after)
            return this.#schedule(after - quiet);
        this.#checking = this.#check((silent) => {
            this.#checking = undefined;
            if (this.#ended)
                return;
            if (silent && Date.now() - this.#last >= after) {
                this.silent = true;
                this.#cancel();
                return;
            }
            this.#schedule(after);
        });
    }
}
//# sourceMappingURL=silence.js.map