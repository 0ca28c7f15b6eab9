// Conversion between plain JavaScript values and google.protobuf.Value.

import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { NullValue, ValueSchema, type Value } from "@bufbuild/protobuf/wkt";

/** Any JSON value: what job input, results, event bodies and details are. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

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
export function toValue(v: unknown): Value {
  return create(ValueSchema, toValueInit(v, "input", new Set()));
}

function kindOf(v: object): string {
  const name = (Object.getPrototypeOf(v) as { constructor?: { name?: string } } | null)?.constructor?.name;
  return name ? `${/^[AEIO]/.test(name) ? "an" : "a"} ${name}` : "an object with an unusual prototype";
}

function toValueInit(v: unknown, path: string, open: Set<object>): MessageInitShape<typeof ValueSchema> {
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
      if (v instanceof Date) return { kind: { case: "stringValue", value: v.toISOString() } };
      const proto = Object.getPrototypeOf(v);
      const plain = Array.isArray(v) || proto === Object.prototype || proto === null;
      if (!plain) {
        throw new TypeError(`${path}: ${kindOf(v)} is not JSON-like (plain objects, arrays, strings, finite numbers, booleans, null)`);
      }
      if (open.has(v)) throw new TypeError(`${path}: a circular reference is not JSON`);
      open.add(v);
      try {
        if (Array.isArray(v)) {
          return { kind: { case: "listValue", value: { values: v.map((x, i) => toValueInit(x, `${path}[${i}]`, open)) } } };
        }
        const fields: Record<string, MessageInitShape<typeof ValueSchema>> = {};
        for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
          if (x === undefined) continue;
          fields[k] = toValueInit(x, `${path}.${k}`, open);
        }
        return { kind: { case: "structValue", value: { fields } } };
      } finally {
        open.delete(v);
      }
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
