/**
 * The largest message the client accepts: 32 MiB, the gateway's own send
 * limit, above the largest result a runtime can send it (the gateway's
 * --max-frame-bytes, 16 MiB by default). gRPC's default of 4 MiB would lose
 * results the job already produced.
 */
export const MAX_RECEIVE_BYTES = 32 << 20;
/** The channel options with MAX_RECEIVE_BYTES, unless the caller set a receive limit of their own. */
export function withReceiveLimit(o) {
    if (o["grpc.max_receive_message_length"] === undefined)
        o["grpc.max_receive_message_length"] = MAX_RECEIVE_BYTES;
    return o;
}
//# sourceMappingURL=limits.js.map