import type { ChannelOptions } from "@grpc/grpc-js";
/**
 * The largest message the client accepts: 32 MiB, the gateway's own send
 * limit, above the largest result a runtime can send it (the gateway's
 * --max-frame-bytes, 16 MiB by default). gRPC's default of 4 MiB would lose
 * results the job already produced.
 */
export declare const MAX_RECEIVE_BYTES: number;
/** The channel options with MAX_RECEIVE_BYTES, unless the caller set a receive limit of their own. */
export declare function withReceiveLimit(o: ChannelOptions): ChannelOptions;
