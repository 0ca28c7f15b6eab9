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
// The request itself leaves late after a stall too: the call is made in one
// turn of the event loop and its HEADERS frame written in that turn's check
// phase (Node's http2 writes from a native immediate), which on a loaded
// machine came 30–85 ms later. The gateway counts the deadline from when the
// request arrives, so a caller's timer started when the call was made ran
// that much ahead of the gateway's, and the margin was spent before the
// answer was even due.
//
// OwnDeadline keeps the deadline here instead: it sends the same grpc-timeout
// header grpc-js would (per attempt, through call credentials, since grpc-js
// sets the header only from a deadline of its own) and gives grpc-js no
// deadline; its timer starts in the check phase after the call was made — as
// the request leaves — and when it runs it waits for the next check phase
// (setImmediate), i.e. after one poll phase has read whatever has arrived,
// before it cancels the call. An
// answer that arrived before the deadline is therefore delivered; an answer
// that has not arrived is not waited for. The trade-off is the caller's own
// time: a call ends up to one event-loop turn after timeoutMs, plus the time
// the process took to send the request. On an idle process both are well
// under a millisecond; a process stalled by 100 ms gives its calls up to that
// much more, which is the time the stall took from them before the request
// left. timeoutprofile/doc.go has the measurements.

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
  #timer?: NodeJS.Timeout;
  #due?: number;
  #expired = false;
  #done = false;

  /**
   * The call credentials that send grpc-timeout: pass them as the call's
   * credentials option. They run for each attempt (grpc-js generates call
   * credentials' metadata per attempt, right before the attempt's request
   * is written), so a retried attempt sends the time then left, as grpc-js
   * does with a deadline of its own.
   */
  readonly credentials: grpc.CallCredentials;

  /**
   * Starts the deadline: its timer runs timeoutMs after the request leaves
   * (the next check phase), and cancel is called one poll phase after that,
   * unless done() was called first.
   */
  constructor(timeoutMs: number, cancel: () => void) {
    this.credentials = grpc.credentials.createFromMetadataGenerator((_params, callback) => {
      const md = new grpc.Metadata();
      md.set("grpc-timeout", grpcTimeout(this.#due === undefined ? timeoutMs : Math.max(this.#due - Date.now(), 1)));
      callback(null, md);
    });
    setImmediate(() => {
      if (this.#done) return;
      this.#due = Date.now() + timeoutMs;
      this.#timer = setTimeout(() => {
        setImmediate(() => {
          if (this.#done) return;
          this.#expired = true;
          cancel();
        });
      }, timeoutMs);
    });
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
