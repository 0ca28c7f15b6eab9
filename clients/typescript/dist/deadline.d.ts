import * as grpc from "@grpc/grpc-js";
/** The grpc-timeout header value for ms milliseconds (at most 8 digits and a unit, rounded up). */
export declare function grpcTimeout(ms: number): string;
export declare class OwnDeadline {
    #private;
    /**
     * Starts the deadline's timer: timeoutMs from now, cancel is called one
     * poll phase later unless done() was called first. It also sets
     * grpc-timeout on md.
     */
    constructor(timeoutMs: number, md: grpc.Metadata, cancel: () => void);
    /** Whether the deadline ended the call. */
    get expired(): boolean;
    /** The call ended (or its result was read): the timer is stopped. */
    done(): void;
}
