import type { GenFile, GenMessage } from "@bufbuild/protobuf/codegenv2";
import type { Message } from "@bufbuild/protobuf";
/**
 * Describes the file google/rpc/error_details.proto.
 */
export declare const file_google_rpc_error_details: GenFile;
/**
 * ErrorInfo describes the cause of an error: a reason unique within its
 * domain, and metadata about it.
 *
 * @generated from message google.rpc.ErrorInfo
 */
export type ErrorInfo = Message<"google.rpc.ErrorInfo"> & {
    /**
     * The reason of the error, UPPER_SNAKE_CASE, e.g. "SESSION_NOT_FOUND".
     *
     * @generated from field: string reason = 1;
     */
    reason: string;
    /**
     * The logical grouping the reason belongs to, e.g. "sessiongate".
     *
     * @generated from field: string domain = 2;
     */
    domain: string;
    /**
     * Additional structured details.
     *
     * @generated from field: map<string, string> metadata = 3;
     */
    metadata: {
        [key: string]: string;
    };
};
/**
 * Describes the message google.rpc.ErrorInfo.
 * Use `create(ErrorInfoSchema)` to create a new message.
 */
export declare const ErrorInfoSchema: GenMessage<ErrorInfo>;
