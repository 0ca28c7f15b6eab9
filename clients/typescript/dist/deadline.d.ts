import * as grpc from "@grpc/grpc-js";
/** The grpc-timeout header value for ms milliseconds (at most 8 digits and a unit, rounded up). */
export declare function grpcTimeout(ms: number): string;
export declare class OwnDeadline {
    #private;
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
    constructor(timeoutMs: number, cancel: () => void);
    /** Whether the deadline ended the call. */
    get expired(): boolean;
    /** The call ended (or its result was read): the timer is stopped. */
    done(): void;
}
