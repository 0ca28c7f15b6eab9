import * as grpc from "@grpc/grpc-js";
/** The grpc-timeout header value for ms milliseconds (at most 8 digits and a unit, rounded up). */
export declare function grpcTimeout(ms: number): string;
export declare class OwnDeadline {
    #private;
    /**
     * Sets grpc-timeout on md and starts the deadline: its timer runs
     * timeoutMs after the request leaves (the next check phase), and cancel is
     * called one poll phase after that, unless done() was called first.
     */
    constructor(timeoutMs: number, md: grpc.Metadata, cancel: () => void);
    /** Whether the deadline ended the call. */
    get expired(): boolean;
    /** The call ended (or its result was read): the timer is stopped. */
    done(): void;
}
