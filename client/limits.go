package client

import "google.golang.org/grpc"

// MaxReceiveBytes is the largest message a Client accepts: 32 MiB, the
// gateway's own send limit, above the largest result a runtime can send it
// (the gateway's --max-frame-bytes, 16 MiB by default). gRPC's default of
// 4 MiB would lose results the job already produced.
const MaxReceiveBytes = 32 << 20

// receiveLimit is the dial option New adds for MaxReceiveBytes.
func receiveLimit() grpc.DialOption {
	return grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxReceiveBytes))
}
