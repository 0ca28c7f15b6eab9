// Our own minimal definition of googleapis' google/rpc/status.proto,
// for the Python and TypeScript clients only: the
// same file name, package, message and field numbers, so the wire format and
// the type URL "type.googleapis.com/google.rpc.Status" are those of the
// original. Never compiled into Go (see ../../buf.yaml).
import { fileDesc, messageDesc } from "@bufbuild/protobuf/codegenv2";
import { file_google_protobuf_any } from "@bufbuild/protobuf/wkt";
/**
 * Describes the file google/rpc/status.proto.
 */
export const file_google_rpc_status = /*@__PURE__*/ fileDesc("Chdnb29nbGUvcnBjL3N0YXR1cy5wcm90bxIKZ29vZ2xlLnJwYyJOCgZTdGF0dXMSDAoEY29kZRgBIAEoBRIPCgdtZXNzYWdlGAIgASgJEiUKB2RldGFpbHMYAyADKAsyFC5nb29nbGUucHJvdG9idWYuQW55YgZwcm90bzM", [file_google_protobuf_any]);
/**
 * Describes the message google.rpc.Status.
 * Use `create(StatusSchema)` to create a new message.
 */
export const StatusSchema = /*@__PURE__*/ messageDesc(file_google_rpc_status, 0);
//# sourceMappingURL=status_pb.js.map