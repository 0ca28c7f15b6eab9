import { randomBytes } from "node:crypto";
/**
 * The idempotency key of one logical run or submit call: the caller's, or a
 * fresh random one. The request is built once per call, so every attempt the
 * retry policy makes carries the same key and a retried attempt gets the job
 * the first one created (ARCP §7.2) instead of running it again.
 */
export function callKey(given) {
    return given || `sg-${randomBytes(16).toString("hex")}`;
}
//# sourceMappingURL=idempotency.js.map