/**
 * How deeply a job's input may nest arrays and objects: the gateway's bound
 * (32), the deepest JSON every client can decode as a google.protobuf.Value.
 * Results deeper than this arrive as raw JSON and decode as any other.
 */
export declare const MAX_INPUT_DEPTH = 32;
/**
 * Throws InvalidArgumentError (reason VALUE_TOO_DEEP, the path in
 * metadata.field, as the gateway would) when v nests arrays and objects deeper
 * than MAX_INPUT_DEPTH. It walks without recursion, so any depth is refused
 * cleanly, before the input is converted or sent.
 */
export declare function checkInputDepth(v: unknown): void;
/** Returns v after checkInputDepth. */
export declare function checkedDepth<T>(v: T): T;
