// Our own minimal definition of googleapis' google/rpc/error_details.proto,
// for the Python and TypeScript clients only:
// ErrorInfo alone, with the package, message name and field numbers of the
// original, so the wire format and the type URL
// "type.googleapis.com/google.rpc.ErrorInfo" are those of the original. The
// other detail types (RetryInfo, BadRequest, …) are left out: sessiongate does
// not send them. Never compiled into Go (see ../../buf.yaml).
import { fileDesc, messageDesc } from "@bufbuild/protobuf/codegenv2";
/**
 * Describes the file google/rpc/error_details.proto.
 */
export const file_google_rpc_error_details = /*@__PURE__*/ fileDesc("Ch5nb29nbGUvcnBjL2Vycm9yX2RldGFpbHMucHJvdG8SCmdvb2dsZS5ycGMikwEKCUVycm9ySW5mbxIOCgZyZWFzb24YASABKAkSDgoGZG9tYWluGAIgASgJEjUKCG1ldGFkYXRhGAMgAygLMiMuZ29vZ2xlLnJwYy5FcnJvckluZm8uTWV0YWRhdGFFbnRyeRovCg1NZXRhZGF0YUVudHJ5EgsKA2tleRgBIAEoCRINCgV2YWx1ZRgCIAEoCToCOAFiBnByb3RvMw");
/**
 * Describes the message google.rpc.ErrorInfo.
 * Use `create(ErrorInfoSchema)` to create a new message.
 */
export const ErrorInfoSchema = /*@__PURE__*/ messageDesc(file_google_rpc_error_details, 0);
//# sourceMappingURL=error_details_pb.js.map