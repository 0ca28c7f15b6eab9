// The call's own deadline, kept by the client instead of by grpc-js.
//
// grpc-js keeps a call's deadline with a timer of its own and cancels the call
// the moment that timer runs. Node's event loop runs due timers before it
// reads the sockets (timers phase, then poll phase), so after any stall of the
// process — a busy loop, a descheduled process on a loaded machine — longer
// than the gateway's deadline margin, the timer is run first and the gateway's
// answer, already waiting in the socket with the timeout details, is thrown
// away: the caller gets a bare DEADLINE_EXCEEDED. The gateway ends an
// own-deadline call a margin (a third of the time left, at most 100 ms) before
// the deadline it is sent, so the answer is normally there in time; only the
// order in which Node looks at it was wrong.
//
// OwnDeadline keeps the deadline here instead: it sends the same grpc-timeout
// header grpc-js would, gives grpc-js no deadline, and when its timer runs it
// waits for the event loop's next check phase (setImmediate), i.e. after one
// poll phase has read whatever has arrived, before it cancels the call. An
// answer that arrived before the deadline is therefore delivered; an answer
// that has not arrived is not waited for. The caller's call ends at most one
// event-loop turn after its deadline, as with grpc-js's own timer after a stall.

import * as grpc from "@grpc/grpc-js";

/** The grpc-timeout header value for ms milliseconds (at most 8 digits and a unit, rounded up). */
export function grpcTimeout(ms: number): string {
  const units: [string, number][] = [
    ["m", 1],
    ["S", 1000],
    ["M", 60_000],
    ["H", 3_600_000],
  ];
  for (const [unit, size] of units) {
    const v = Math.ceil(ms / size);
    if (v < 1e8) return `${Math.max(v, 1)}${unit}`;
  }
  return "99999999H";
}

export class OwnDeadline {
  readonly #timer: NodeJS.Timeout;
  #expired = false;
  #done = false;

  /**
   * Starts the deadline's timer: timeoutMs from now, cancel is called one
   * poll phase later unless done() was called first. It also sets
   * grpc-timeout on md.
   */
  constructor(timeoutMs: number, md: grpc.Metadata, cancel: () => void) {
    md.set("grpc-timeout", grpcTimeout(timeoutMs));
    this.#timer = setTimeout(() => {
      setImmediate(() => {
        if (this.#done) return;
        this.#expired = true;
        cancel();
      });
    }, timeoutMs);
  }

  /** Whether the deadline ended the call. */
  get expired(): boolean {
    return this.#expired;
  }

  /** The call ended (or its result was read): the timer is stopped. */
  done(): void {
    this.#done = true;
    clearTimeout(this.#timer);
  }
}
