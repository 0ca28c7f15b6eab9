// The WatchJob method of a fake gateway (a grpc-js server in a test).

import { fromBinary, toBinary } from "@bufbuild/protobuf";

import { WatchJobRequestSchema, WatchJobResponseSchema } from "../src/gen/sessiongate/v1/sessiongate_pb.js";

/** WatchJob's definition for grpc.Server.addService, in the generated messages. */
export const watchJobDef = {
  path: "/sessiongate.v1.SessionGateway/WatchJob",
  requestStream: false,
  responseStream: true,
  requestSerialize: (m: unknown) => Buffer.from(toBinary(WatchJobRequestSchema, m as never)),
  requestDeserialize: (b: Buffer) => fromBinary(WatchJobRequestSchema, b),
  responseSerialize: (m: unknown) => Buffer.from(toBinary(WatchJobResponseSchema, m as never)),
  responseDeserialize: (b: Buffer) => fromBinary(WatchJobResponseSchema, b),
};
