// Method definitions of a fake gateway (a grpc-js server in a test), in
// the generated messages.

import { fromBinary, toBinary, type DescMessage } from "@bufbuild/protobuf";

import {
  RunJobRequestSchema,
  RunJobResponseSchema,
  SubmitJobRequestSchema,
  SubmitJobResponseSchema,
  WatchJobRequestSchema,
  WatchJobResponseSchema,
} from "../src/gen/sessiongate/v1/sessiongate_pb.js";

/** A SessionGateway method's definition for grpc.Server.addService. */
function methodDef(name: string, req: DescMessage, res: DescMessage, responseStream: boolean) {
  return {
    path: `/sessiongate.v1.SessionGateway/${name}`,
    requestStream: false,
    responseStream,
    requestSerialize: (m: unknown) => Buffer.from(toBinary(req, m as never)),
    requestDeserialize: (b: Buffer) => fromBinary(req, b),
    responseSerialize: (m: unknown) => Buffer.from(toBinary(res, m as never)),
    responseDeserialize: (b: Buffer) => fromBinary(res, b),
  };
}

export const runJobDef = methodDef("RunJob", RunJobRequestSchema, RunJobResponseSchema, false);
export const submitJobDef = methodDef("SubmitJob", SubmitJobRequestSchema, SubmitJobResponseSchema, false);
export const watchJobDef = methodDef("WatchJob", WatchJobRequestSchema, WatchJobResponseSchema, true);
