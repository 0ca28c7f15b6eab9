import { type Value } from "@bufbuild/protobuf/wkt";
/** Any JSON value: what job input, results, event bodies and details are. */
export type JsonValue = null | boolean | number | string | JsonValue[] | {
    [key: string]: JsonValue;
};
/**
 * toValue returns a JSON-like value as a google.protobuf.Value: plain objects
 * become structValue, arrays listValue, and so on; a Date becomes its ISO
 * string. Numbers are IEEE-754 doubles on the wire, as they are in
 * JavaScript, so a number crosses exactly; a bigint does not fit and throws
 * (send it as a string). Anything JSON cannot carry faithfully throws a
 * TypeError naming its path (e.g. `input.a[2]`): NaN and ±Infinity,
 * undefined, functions and symbols, a Map or Set, typed arrays and
 * ArrayBuffers, other class instances, and cycles. Object properties whose
 * value is undefined are left out, as JSON.stringify does.
 */
export declare function toValue(v: unknown): Value;
/**
 * fromValue returns a google.protobuf.Value as a plain JSON value (an unset
 * Value is null). Object keys come out sorted: a Struct keeps no key order.
 */
export declare function fromValue(v: Value | undefined): JsonValue;
/**
 * fromRawOrValue returns the raw JSON text (the gateway's raw* fields) parsed
 * with JSON.parse when it was sent instead of the Value (JSON with no
 * google.protobuf.Value form: a number beyond float64, invalid UTF-8), else
 * the Value. JSON.parse rounds integers beyond 2^53, as it does everywhere.
 */
export declare function fromRawOrValue(raw: Uint8Array, v: Value | undefined): JsonValue;
