import { status as Code } from "@grpc/grpc-js";
import { InvalidArgumentError } from "./errors.js";
/**
 * How deeply a job's input may nest arrays and objects: the gateway's bound
 * (32), the deepest JSON every client can decode as a google.protobuf.Value.
 * Results deeper than this arrive as raw JSON and decode as any other.
 */
export const MAX_INPUT_DEPTH = 32;
/**
 * Throws InvalidArgumentError (reason VALUE_TOO_DEEP, the path in
 * metadata.field, as the gateway would) when v nests arrays and objects deeper
 * than MAX_INPUT_DEPTH. It walks without recursion, so any depth is refused
 * cleanly, before the input is converted or sent.
 */
export function checkInputDepth(v) {
    const stack = [[v, 0, ""]];
    while (stack.length > 0) {
        const [o, depth, path] = stack.pop();
        if (o === null || typeof o !== "object" || o instanceof Date)
            continue;
        const children = Array.isArray(o)
            ? o.map((x, i) => [x, `${path}[${i}]`])
            : Object.entries(o).map(([k, x]) => [x, `${path}.${k}`]);
        if (depth === MAX_INPUT_DEPTH) {
            const field = `input${path}`;
            throw new InvalidArgumentError(Code.INVALID_ARGUMENT, `${field}: nested deeper than ${MAX_INPUT_DEPTH} arrays and objects, the deepest every client can decode`, { reason: "VALUE_TOO_DEEP", domain: "sessiongate", metadata: { field, max_depth: String(MAX_INPUT_DEPTH) } });
        }
        for (let i = children.length - 1; i >= 0; i--)
            stack.push([children[i][0], depth + 1, children[i][1]]);
    }
}
/** Returns v after checkInputDepth. */
export function checkedDepth(v) {
    checkInputDepth(v);
    return v;
}
//# sourceMappingURL=depth.js.map