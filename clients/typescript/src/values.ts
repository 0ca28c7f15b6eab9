// Conversion between plain JavaScript values and google.protobuf.Value.

import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { NullValue, ValueSchema, type Value } from "@bufbuild/protobuf/wkt";

/** Any JSON value: what job input, results, event bodies and details are. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/**
 * toValue returns a JSON-like value as a google.protobuf.Value: objects become
 * structValue, arrays listValue, and so on. Numbers are IEEE-754 doubles on the
 * wire, as they are in JavaScript, so a number crosses exactly; a bigint does
 * not fit and throws (send it as a string). NaN, ±Infinity, undefined,
 * functions and symbols are not JSON and throw a TypeError; object properties
 * whose value is undefined are left out, as JSON.stringify does.
 */
export function toValue(v: unknown): Value {
  return create(ValueSchema, toValueInit(v, "input"));
}

function toValueInit(v: unknown, path: string): MessageInitShape<typeof ValueSchema> {
  if (v === null) return { kind: { case: "nullValue", value: NullValue.NULL_VALUE } };
  switch (typeof v) {
    case "boolean":
      return { kind: { case: "boolValue", value: v } };
    case "number":
      if (!Number.isFinite(v)) throw new TypeError(`${path}: ${v} is not a JSON number`);
      return { kind: { case: "numberValue", value: v } };
    case "string":
      return { kind: { case: "stringValue", value: v } };
    case "bigint":
      throw new TypeError(`${path}: bigint does not fit a google.protobuf.Value number (a double); send it as a string`);
    case "object": {
      if (Array.isArray(v)) {
        return { kind: { case: "listValue", value: { values: v.map((x, i) => toValueInit(x, `${path}[${i}]`)) } } };
      }
      if (v instanceof Date) return { kind: { case: "stringValue", value: v.toISOString() } };
      const fields: Record<string, MessageInitShape<typeof ValueSchema>> = {};
      for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
        if (x === undefined) continue;
        fields[k] = toValueInit(x, `${path}.${k}`);
      }
      return { kind: { case: "structValue", value: { fields } } };
    }
    default:
      throw new TypeError(`${path}: ${typeof v} is not JSON`);
  }
}

/**
 * fromValue returns a google.protobuf.Value as a plain JSON value (an unset
 * Value is null). Object keys come out sorted: a Struct keeps no key order.
 */
export function fromValue(v: Value | undefined): JsonValue {
  if (v === undefined) return null;
  const k = v.kind;
  switch (k.case) {
    case "numberValue":
    case "stringValue":
    case "boolValue":
      return k.value;
    case "structValue": {
      const out: { [key: string]: JsonValue } = {};
      // google.protobuf.Struct keeps no key order: sort, for a stable result.
      for (const key of Object.keys(k.value.fields).sort()) out[key] = fromValue(k.value.fields[key]);
      return out;
    }
    case "listValue":
      return k.value.values.map(fromValue);
    default:
      return null;
  }
}

const utf8 = new TextDecoder();

/**
 * fromRawOrValue returns the raw JSON text (the gateway's raw* fields) parsed
 * with JSON.parse when it was sent instead of the Value (JSON with no
 * google.protobuf.Value form: a number beyond float64, invalid UTF-8), else
 * the Value. JSON.parse rounds integers beyond 2^53, as it does everywhere.
 */
export function fromRawOrValue(raw: Uint8Array, v: Value | undefined): JsonValue {
  if (raw.length > 0) return JSON.parse(utf8.decode(raw)) as JsonValue;
  return fromValue(v);
}
